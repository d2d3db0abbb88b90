package cli

import (
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/spf13/cobra"

	"github.com/outflowhq/outflow/internal/dynamo"
)

func (a *app) statsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "stats",
		Short: "Count pending, claimed and failed rows per queue and per shard, and the backlog lag",
		Long: "Counts come from the indexes: the due index (with the queue projected) and the dead index. " +
			"Only rows already due are read from the table, for their status. No table scan.",
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			op, err := a.operator(cmd.Context())
			if err != nil {
				return err
			}
			now := a.now()
			st, err := op.Stats(cmd.Context(), now)
			if err != nil {
				return fmt.Errorf("stats: %w", err)
			}
			out := struct {
				*dynamo.Stats
				OldestDueAgeMs int64 `json:"oldest_due_age_ms"`
			}{Stats: st}
			if !st.OldestDue.IsZero() {
				out.OldestDueAgeMs = now.Sub(st.OldestDue).Milliseconds()
			}
			return a.emit(out, func(w io.Writer) {
				table := func(title string, m map[string]*dynamo.Counts) {
					fmt.Fprintf(w, "%s\tPENDING\tDUE NOW\tCLAIMED\tFAILED\n", title)
					for _, k := range slices.Sorted(maps.Keys(m)) {
						c := m[k]
						fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\n", k, c.Pending, c.Due, c.Claimed, c.Failed)
					}
				}
				table("QUEUE", st.Queues)
				fmt.Fprintf(w, "total\t%d\t%d\t%d\t%d\n\n", st.Total.Pending, st.Total.Due, st.Total.Claimed, st.Total.Failed)
				table("SHARD", st.Shards)
				fmt.Fprintf(w, "\noldest due row waiting\t%dms\n", out.OldestDueAgeMs)
			})
		},
	}
}
