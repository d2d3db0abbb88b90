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
	"github.com/outflowhq/outflow/internal/config"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

// enqueued is what enqueue prints: the staged row's key and route, and
// whether it was staged in its group's order.
type enqueued struct {
	Key     string `json:"key"`
	Queue   string `json:"queue"`
	Ordered bool   `json:"ordered"`
}

func (a *app) enqueueCommand() *cobra.Command {
	var queue, body, bodyFile, group, key, routes, traceParent string
	var attrs []string
	var delay time.Duration
	var maxBytes int
	cmd := &cobra.Command{
		Use:   "enqueue --queue Q (--body STR|--body-file F) [--attr k=v]... [--group G] [--delay DUR] [--key K] [--traceparent TP]",
		Short: "Stage one row, validated as the producer package does (against its route's target when routes are known)",
		Long: "enqueue validates the row as the producer package does. Where the dispatcher has published its configuration " +
			"in the table (outflow config), the row is checked against it: a queue that is not a published route is refused, " +
			"a row of a published ordered route is staged in its group's order (--ordered is not needed), and the shards and " +
			"message size limit are the published ones. Routes, ordered routes, shards or a size limit given here (flags or " +
			"OUTFLOW_* variables) that differ from the published ones are refused (exit 2). Where none is published, the " +
			"flags and variables apply as given.",
		Args: args(cobra.NoArgs),
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
			// Whether a row takes a group is the route's name's to say
			// (.fifo), so a missing or a stray --group is a mistake in the
			// call, as an empty body is, found before the table is read.
			switch fifo := outbox.FIFORoute(queue); {
			case fifo && group == "":
				return usagef("--group is required: route %q is FIFO, and a FIFO queue needs a message group", queue)
			case !fifo && group != "":
				return usagef("--group %q: route %q is not FIFO (its name does not end in .fifo), and only a FIFO queue or topic has message groups; drop --group", group, queue)
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
			cfg, err := a.enqueueConfig(cmd, client, routes, maxBytes, queue)
			if err != nil {
				return err
			}
			p, err := outflow.NewProducer(client, cfg)
			if err != nil {
				return usageError{err}
			}
			keys, err := p.Put(cmd.Context(), row)
			if err != nil {
				return fmt.Errorf("enqueue: %w", err)
			}
			res := enqueued{keys[0], queue, slices.Contains(cfg.Ordered, queue)}
			return a.emit(res, func(w io.Writer) {
				if res.Ordered {
					fmt.Fprintf(w, "staged %s on %s, in group %s's order\n", res.Key, res.Queue, group)
					return
				}
				fmt.Fprintf(w, "staged %s on %s\n", res.Key, res.Queue)
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&queue, "queue", "", "route name (required)")
	f.StringVar(&body, "body", "", "message body")
	f.StringVar(&bodyFile, "body-file", "", "read the message body from this file")
	f.StringArrayVar(&attrs, "attr", nil, "message attribute name=value (repeatable)")
	f.StringVar(&group, "group", "", "FIFO message group (required for .fifo routes, refused for others)")
	durationVar(f, &delay, "delay", 0, "deliver no sooner than this from now")
	f.StringVar(&key, "key", "", "dispatch key (default: a new ULID)")
	f.StringVar(&routes, "routes", "", "the dispatcher's routes name=target,..., to check the row against its target's limits (default: the published ones, else $OUTFLOW_ROUTES; none: SQS's)")
	f.StringVar(&traceParent, "traceparent", "", "W3C trace context the message carries to its consumer")
	f.IntVar(&maxBytes, "max-message-bytes", 0, "the dispatcher's message size limit (default: the published one, else $OUTFLOW_MAX_MESSAGE_BYTES, else 262144)")
	a.orderedFlag(cmd)
	_ = cmd.MarkFlagRequired("queue")
	return cmd
}

// enqueueConfig is the producer configuration enqueue stages with: the
// published one, checked against what this shell gives and queue, or
// where none is published, what the shell gives.
func (a *app) enqueueConfig(cmd *cobra.Command, client dynamo.ItemGetter, routes string, maxBytes int, queue string) (outflow.Config, error) {
	s := a.shellSettings(cmd, routes)
	pub, found, err := a.published(cmd.Context(), client)
	if err != nil {
		return outflow.Config{}, err
	}
	if !found {
		if v := s["OUTFLOW_MAX_MESSAGE_BYTES"]; v != "" {
			if maxBytes, err = strconv.Atoi(v); err != nil {
				return outflow.Config{}, usagef("OUTFLOW_MAX_MESSAGE_BYTES=%q: %v", v, err)
			}
		}
		var ordered map[string]outbox.DeadHead
		if v := s["OUTFLOW_ORDERED"]; v != "" {
			if ordered, err = config.ParseOrdered(v); err != nil {
				from := "OUTFLOW_ORDERED"
				if a.orderedRoutes != "" {
					from = "--ordered"
				}
				return outflow.Config{}, usagef("%s=%q: %w", from, v, err)
			}
		}
		// A list, never nil: the settings say which routes are ordered
		// (none by default, as the dispatcher's), and nil would make the
		// producer look for a published configuration there is none of.
		return outflow.Config{Table: a.table, Shards: a.shards, Routes: s["OUTFLOW_ROUTES"], MaxMessageBytes: maxBytes,
			Ordered: append([]string{}, slices.Sorted(maps.Keys(ordered))...)}, nil
	}
	mine, err := s.onPublished(pub)
	if err != nil {
		return outflow.Config{}, err
	}
	if diffs := pub.Diff(mine); len(diffs) > 0 {
		return outflow.Config{}, a.differs(pub, diffs, "drop the flags and OUTFLOW_* variables that differ, and enqueue checks against the published ones")
	}
	if _, ok := pub.Routes[queue]; !ok && strings.TrimSpace(queue) != "" {
		return outflow.Config{}, fmt.Errorf("enqueue: %w: route %q is not one of the routes the dispatcher published in table %s (%s)",
			outflow.ErrNoRoute, queue, a.table, strings.Join(slices.Sorted(maps.Keys(pub.Routes)), ", "))
	}
	return outflow.Config{Table: a.table, Shards: pub.Shards, Routes: pub.RoutesString(), MaxMessageBytes: pub.MaxMessageBytes,
		Ordered: append([]string{}, slices.Sorted(maps.Keys(pub.Ordered))...)}, nil
}
