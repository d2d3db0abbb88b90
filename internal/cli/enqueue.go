package cli

import (
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/outflowhq/outflow"
)

// enqueued is what enqueue prints: the staged row's key and route.
type enqueued struct {
	Key   string `json:"key"`
	Queue string `json:"queue"`
}

func (a *app) enqueueCommand() *cobra.Command {
	var queue, body, bodyFile, group, key, routes, traceParent string
	var attrs []string
	var delay time.Duration
	var maxBytes int
	cmd := &cobra.Command{
		Use:   "enqueue --queue Q (--body STR|--body-file F) [--attr k=v]... [--group G] [--delay DUR] [--key K] [--traceparent TP]",
		Short: "Stage one row, validated as the producer package does (against its route's target when routes are known)",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			bodySet, fileSet := cmd.Flags().Changed("body"), cmd.Flags().Changed("body-file")
			switch {
			case bodySet && fileSet, !bodySet && !fileSet:
				return usagef("give exactly one of --body and --body-file")
			case bodySet && body == "":
				return usagef("--body is empty: a row needs a payload")
			case fileSet && bodyFile == "":
				return usagef("--body-file is empty: name a file")
			}
			payload := []byte(body)
			if bodyFile != "" {
				var err error
				if payload, err = os.ReadFile(bodyFile); err != nil {
					return fmt.Errorf("read body: %w", err)
				}
			}
			row := outflow.Row{Key: key, Queue: queue, Payload: payload, Group: group, Attributes: map[string]string{}, TraceParent: traceParent}
			for _, kv := range attrs {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return usagef("--attr %q: want name=value", kv)
				}
				row.Attributes[k] = v
			}
			if delay > 0 {
				row.NotBefore = a.now().Add(delay)
			}
			if a.table == "" {
				return usagef("no table: pass --table or set OUTFLOW_TABLE")
			}
			client, err := a.dynamoClient(cmd.Context())
			if err != nil {
				return err
			}
			if routes == "" {
				routes = a.getenv("OUTFLOW_ROUTES")
			}
			if !cmd.Flags().Changed("max-message-bytes") {
				if v := a.getenv("OUTFLOW_MAX_MESSAGE_BYTES"); v != "" {
					if maxBytes, err = strconv.Atoi(v); err != nil {
						return usagef("OUTFLOW_MAX_MESSAGE_BYTES=%q: %v", v, err)
					}
				}
			}
			ordered, err := a.ordered()
			if err != nil {
				return err
			}
			p, err := outflow.NewProducer(client, outflow.Config{Table: a.table, Shards: a.shards, Routes: routes,
				MaxMessageBytes: maxBytes, Ordered: slices.Sorted(maps.Keys(ordered))})
			if err != nil {
				return usageError{err}
			}
			keys, err := p.Put(cmd.Context(), row)
			if err != nil {
				return fmt.Errorf("enqueue: %w", err)
			}
			res := enqueued{keys[0], queue}
			return a.emit(res, func(w io.Writer) { fmt.Fprintf(w, "staged %s on %s\n", res.Key, res.Queue) })
		},
	}
	f := cmd.Flags()
	f.StringVar(&queue, "queue", "", "route name (required)")
	f.StringVar(&body, "body", "", "message body")
	f.StringVar(&bodyFile, "body-file", "", "read the message body from this file")
	f.StringArrayVar(&attrs, "attr", nil, "message attribute name=value (repeatable)")
	f.StringVar(&group, "group", "", "FIFO message group (required for .fifo queues)")
	durationVar(f, &delay, "delay", 0, "deliver no sooner than this from now")
	f.StringVar(&key, "key", "", "dispatch key (default: a new ULID)")
	f.StringVar(&routes, "routes", "", "the dispatcher's routes name=target,..., to check the row against its target's limits (default $OUTFLOW_ROUTES; none: SQS's)")
	f.StringVar(&traceParent, "traceparent", "", "W3C trace context the message carries to its consumer")
	f.IntVar(&maxBytes, "max-message-bytes", 0, "the dispatcher's message size limit (default $OUTFLOW_MAX_MESSAGE_BYTES, else 262144)")
	a.orderedFlag(cmd)
	_ = cmd.MarkFlagRequired("queue")
	return cmd
}
