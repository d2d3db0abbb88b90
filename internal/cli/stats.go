package cli

import (
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/spf13/cobra"

	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

func (a *app) statsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "stats",
		Short: "Count pending, claimed and failed rows per queue and per shard, the backlog lag, and the blocked ordered groups",
		Long: "Counts come from the indexes: the due index (with the queue projected) and the dead index. " +
			"Only rows already due are read from the table, for their status, and dead letters of FIFO routes, for their group. No table scan. " +
			"An ordered group is blocked when its earliest dead letter blocks it (see dead list); " +
			"the oldest blocked age is how long the oldest such dead letter has been dead. " +
			"Stray rows, on a shard the sweep never queries (a producer with a larger OUTFLOW_SHARDS, or a shard that is not a number), " +
			"are not in the counts: the sweep's audit finds them and moves them to their key's shard, and stats reports what it found, " +
			"in its last full pass over the due index, in the pass under way, and in all.",
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ordered, err := a.ordered()
			if err != nil {
				return err
			}
			op, err := a.operator(cmd.Context())
			if err != nil {
				return err
			}
			now := a.now()
			st, err := op.Stats(cmd.Context(), now, func(d dynamo.DeadRef) bool {
				return outbox.DeadLetterBlocks(ordered, d.Link())
			})
			if err != nil {
				return fmt.Errorf("stats: %w", err)
			}
			out := struct {
				*dynamo.Stats
				OldestDueAgeMs     int64 `json:"oldest_due_age_ms"`
				OldestBlockedAgeMs int64 `json:"oldest_blocked_age_ms"`
			}{Stats: st}
			if !st.OldestDue.IsZero() {
				out.OldestDueAgeMs = now.Sub(st.OldestDue).Milliseconds()
			}
			if !st.OldestBlocked.IsZero() {
				out.OldestBlockedAgeMs = max(0, now.Sub(st.OldestBlocked).Milliseconds())
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
				fmt.Fprintf(w, "blocked ordered groups\t%d\n", st.BlockedGroups)
				fmt.Fprintf(w, "oldest blocked head\t%dms\n", out.OldestBlockedAgeMs)
				fmt.Fprintf(w, "stray rows found by the audit\t%d last pass, %d this pass, %d in all\n", st.Stray.LastPass, st.Stray.ThisPass, st.Stray.Total)
			})
		},
	}
	a.orderedFlag(cmd)
	return cmd
}
