package cli

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/outflowhq/outflow/internal/version"
)

// publishedView is `outflow config --output json`.
type publishedView struct {
	Table           string            `json:"table"`
	Routes          map[string]string `json:"routes"`
	Ordered         map[string]string `json:"ordered"`
	Shards          int               `json:"shards"`
	MaxMessageBytes int               `json:"max_message_bytes"`
	Revision        int64             `json:"revision"`
	PublishedAt     time.Time         `json:"published_at"`
	PublishedBy     string            `json:"published_by,omitempty"`
	// UnsureWaitMs is how long a purge holds a dead letter after an
	// unsure send of it; absent from an item published before it.
	UnsureWaitMs int64 `json:"unsure_wait_ms,omitempty"`
	// Version is the dispatcher's release version; absent from an item
	// published before 1.0.0.
	Version string `json:"version,omitempty"`
}

func (a *app) configCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "config",
		Short: "Print the configuration the dispatcher published in the table: routes, ordered routes, shards, message size limit",
		Long: "The sweep and wake functions publish the configuration they run with in the outbox table, as one item " +
			"(docs/published-config.md), at their first invocation after a cold start, written only when it changed. " +
			"enqueue and sweep check against it; a producer can read it (outflow.LoadPublished). " +
			"A table with none published yet is an error (exit 1).",
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if a.table == "" {
				return usagef("no table: pass --table or set OUTFLOW_TABLE")
			}
			client, err := a.dynamoClient(cmd.Context())
			if err != nil {
				return err
			}
			pub, found, err := a.published(cmd.Context(), client)
			if err != nil {
				return err
			}
			if !found {
				return fmt.Errorf("table %s: no dispatcher configuration published yet (the sweep and wake functions publish it at their first invocation)", a.table)
			}
			v := publishedView{Table: a.table, Routes: pub.Routes, Ordered: pub.Ordered, Shards: pub.Shards, MaxMessageBytes: pub.MaxMessageBytes,
				Revision: pub.Revision, PublishedAt: pub.PublishedAt.UTC(), PublishedBy: pub.PublishedBy, UnsureWaitMs: pub.UnsureWait.Milliseconds(), Version: pub.Version}
			return a.emit(v, func(w io.Writer) {
				fmt.Fprintln(w, "ROUTE\tTARGET\tORDERED")
				for _, name := range slices.Sorted(maps.Keys(pub.Routes)) {
					fmt.Fprintf(w, "%s\t%s\t%s\n", name, pub.Routes[name], orDash(pub.Ordered[name]))
				}
				fmt.Fprintf(w, "\nshards\t%d\nmax message bytes\t%d\n", pub.Shards, pub.MaxMessageBytes)
				if pub.UnsureWait > 0 {
					fmt.Fprintf(w, "unsure wait\t%s (a purge holds a dead letter this long after an unsure send of it)\n", pub.UnsureWait)
				}
				fmt.Fprintf(w, "dispatcher version\t%s\n", dispatcherVersion(pub.Version))
				fmt.Fprintf(w, "revision\t%d\npublished\t%s%s\n", pub.Revision, pub.PublishedAt.UTC().Format(time.RFC3339), publishedBy(pub))
			})
		},
	}
}

// dispatcherVersion is the published version as `outflow config` prints
// it, with this CLI's where they differ: an operator's first question
// after an upgrade is whether both halves run it.
func dispatcherVersion(v string) string {
	switch v {
	case "":
		return "before 1.0.0 (the item names none)"
	case version.Version:
		return v
	}
	return fmt.Sprintf("%s (this outflow is %s)", v, version.Version)
}
