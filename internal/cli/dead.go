package cli

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/operate"
)

func (a *app) deadCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dead",
		Short: "Inspect, redrive and purge dead letters (rows Outflow could not deliver)",
	}
	cmd.AddCommand(a.deadListCommand(), a.deadShowCommand(), a.deadRedriveCommand(), a.deadPurgeCommand())
	return groupCommand(cmd)
}

func (a *app) deadListCommand() *cobra.Command {
	var queue string
	var since time.Duration
	var limit int
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List dead letters, newest first, with how each ended, marking those that block their ordered group",
		Long: "OUTCOME says how each ended: dead-letter (its place, if it has one, not closed), dead-letter-closed (skip sent the message closing its place), " +
			"dead-letter-unsent or dead-letter-unsure (that message failed: not sent, or perhaps sent), purged-unsent or purged-unsure (a purge's closing message failed likewise). " +
			"A dead letter blocks its ordered group when it has a place in one (seq) and its route's dead-head policy is block " +
			"(--ordered, or OUTFLOW_ORDERED as the dispatcher has it, else the ordered routes the dispatcher published; a route not listed is held to block, as the dispatcher holds it). " +
			"The group and place of dead letters of FIFO routes are read from the table.",
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 0 || since < 0 {
				return usagef("--limit and --since must not be negative")
			}
			ordered, err := a.ordered(cmd.Context())
			if err != nil {
				return err
			}
			op, err := a.operator(cmd.Context())
			if err != nil {
				return err
			}
			q := dynamo.DeadQuery{Queue: queue}
			if since > 0 {
				q.Since = a.now().Add(-since)
			}
			dead, err := operate.ListDead(cmd.Context(), op, q, limit, ordered)
			if err != nil {
				return fmt.Errorf("list dead letters: %w", err)
			}
			return a.emit(dead, func(w io.Writer) {
				fmt.Fprintln(w, "KEY\tQUEUE\tGROUP\tATTEMPTS\tFAILED\tBLOCKS\tOUTCOME\tLAST ERROR")
				for _, d := range dead {
					fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", d.Key, d.Queue, orDash(d.Group), d.Attempt, when(d.FailedAt),
						yesOrDash(d.BlocksGroup), d.Outcome, shorten(d.LastError, 80))
				}
			})
		},
	}
	cmd.Flags().StringVar(&queue, "queue", "", "only this queue")
	durationVar(cmd.Flags(), &since, "since", 0, "only those failed within this long, e.g. 24h or 7d")
	cmd.Flags().IntVar(&limit, "limit", 50, "at most this many (0: all)")
	a.orderedFlag(cmd)
	return cmd
}

func (a *app) deadShowCommand() *cobra.Command {
	var payload bool
	cmd := &cobra.Command{
		Use:   "show KEY",
		Short: "Show one row with how it ended, its error history (the payload only with --payload), and whether it blocks its ordered group",
		Long: "The outcome line says how the row ended, or where it stands, which its status alone does not: a purged row whose closing message was sent reads status done, " +
			"yet only the message closing its place went, never the row (outcome purged). Outcomes: pending, retrying, claimed, redriven, delivered, closing, purging, purged, " +
			"purged-unsent, purged-unsure, dead-letter, dead-letter-closed, dead-letter-unsent, dead-letter-unsure, and unrecognized for a state the dispatcher never writes.",
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, keys []string) error {
			ordered, err := a.ordered(cmd.Context())
			if err != nil {
				return err
			}
			op, err := a.operator(cmd.Context())
			if err != nil {
				return err
			}
			s, err := operate.Show(cmd.Context(), op, keys[0], payload, ordered)
			if err != nil {
				return fmt.Errorf("show dead letter: %w", err)
			}
			if s == nil {
				return fmt.Errorf("no row with key %q in %s", keys[0], a.table)
			}
			return a.emit(s, func(w io.Writer) { printRow(w, s) })
		},
	}
	cmd.Flags().BoolVar(&payload, "payload", false, "also print the payload")
	a.orderedFlag(cmd)
	return cmd
}

func printRow(w io.Writer, s *operate.Row) {
	fmt.Fprintf(w, "key\t%s\n", s.Key)
	fmt.Fprintf(w, "queue\t%s\n", s.Queue)
	fmt.Fprintf(w, "outcome\t%s: %s\n", s.Outcome, s.OutcomeDetail)
	status := string(s.Status)
	if s.Closed != "" {
		status += " (closed: " + s.Closed + ")"
	}
	fmt.Fprintf(w, "status\t%s\n", status)
	fmt.Fprintf(w, "attempts\t%d\n", s.Attempts)
	if s.Group != "" {
		fmt.Fprintf(w, "group\t%s\n", s.Group)
	}
	if s.Seq > 0 {
		fmt.Fprintf(w, "seq\t%d\n", s.Seq)
	}
	if s.BlocksGroup {
		fmt.Fprintln(w, "blocks group\tyes: the later rows of its group wait until it is redriven or purged")
	}
	if s.MayHaveClosed {
		fmt.Fprintln(w, "place\tmay be closed at the consumer: a redrive needs --late (the row would arrive late); a purge closes it for certain")
	}
	fmt.Fprintf(w, "created\t%s\n", when(s.CreatedAt))
	if !s.RedrivenAt.IsZero() {
		fmt.Fprintf(w, "redriven\t%s (last time; attempts count from 1 again after a redrive)\n", when(s.RedrivenAt))
	}
	if !s.FailedAt.IsZero() {
		fmt.Fprintf(w, "failed\t%s\n", when(s.FailedAt))
	} else {
		fmt.Fprintf(w, "due\t%s\n", when(s.DueAt))
	}
	fmt.Fprintf(w, "attributes\t%d\n", len(s.Attributes))
	if s.Malformed != "" {
		fmt.Fprintf(w, "malformed\t%s\n", s.Malformed)
	}
	switch {
	case s.PayloadDropped:
		fmt.Fprintln(w, "payload\tnot kept after delivery (the tombstone keeps a digest of it, to recognise a retry of this key)")
	case s.Payload != nil:
		fmt.Fprintf(w, "payload\t%s\n", *s.Payload)
	default:
		fmt.Fprintf(w, "payload\t(%d bytes; --payload to show)\n", s.PayloadBytes)
	}
	fmt.Fprintf(w, "errors\t%d\n", len(s.Errors))
	for _, e := range s.Errors {
		if e.Redriven {
			fmt.Fprintln(w, "  --\tredriven: attempts count from 1 again")
		}
		fmt.Fprintf(w, "  #%d\t%s  %s\n", e.Attempt, when(e.At), oneLine(e.Message))
	}
}

// selection is the rows a bulk command acts on: keys, a queue, or all.
type selection struct {
	operate.Selection
	all bool
}

// checkSelection refuses a selection that is not exactly one of keys,
// --queue and --all.
func checkSelection(keys []string, sel selection) error {
	n := 0
	for _, set := range []bool{len(keys) > 0, sel.Queue != "", sel.all} {
		if set {
			n++
		}
	}
	if n != 1 {
		return usagef("name the rows: KEY..., --queue Q or --all (exactly one)")
	}
	if sel.OlderThan < 0 {
		return usagef("--older-than must not be negative, got %s", sel.OlderThan)
	}
	if len(keys) > 0 && sel.OlderThan > 0 {
		return usagef("--older-than applies to --queue or --all, not to keys")
	}
	return nil
}

func (a *app) report(res operate.Result, past string) error {
	return a.emit(res, func(w io.Writer) {
		if res.DryRun {
			fmt.Fprintf(w, "dry run: would %s %d row(s)\n", res.Action, len(res.Keys))
			for _, k := range res.Keys {
				fmt.Fprintln(w, k)
			}
			return
		}
		of := ""
		if res.OlderThan != "" {
			of = " of those failed more than " + res.OlderThan + " ago"
		}
		fmt.Fprintf(w, "%s %d%s, skipped %d (not dead letters)\n", past, res.Done, of, res.Skipped)
		if res.Held > 0 {
			fmt.Fprintf(w, "held %d: a send of theirs ended unsure and may still land until %s; purge them after that\n", res.Held, res.HeldUntil.Format(time.RFC3339))
		}
		if res.MayHaveClosed > 0 {
			fmt.Fprintf(w, "not redriven %d: the message closing their place may have reached the consumer (closed: unsure), so each could arrive after its place was closed, "+
				"to be recorded late and applied nowhere by a GapWait consumer; purge them to close their place for certain, and stage their effect again under a new key if it is needed, "+
				"or redrive them with --late if their consumer applies late rows\n", res.MayHaveClosed)
		}
	})
}

func (a *app) deadRedriveCommand() *cobra.Command {
	var sel selection
	var dryRun, late bool
	cmd := &cobra.Command{
		Use:   "redrive (KEY...|--queue Q|--all) [--late]",
		Short: "Return dead letters to pending with a fresh attempt budget, due now",
		Long: "Redrive is conditional: only rows that are still failed move; others are counted as skipped. " +
			"A dead letter whose place was closed (closed: dead-letter, on a skip route) arrives after its place, late: a GapWait consumer records it and, by default, applies nothing. " +
			"One whose place's closing message may have reached the consumer (closed: unsure or purge-unsure) is not redriven, as it could arrive late too; " +
			"purge it to close its place for certain, or redrive it with --late.",
		RunE: func(cmd *cobra.Command, keys []string) error {
			if err := checkSelection(keys, sel); err != nil {
				return err
			}
			op, err := a.operator(cmd.Context())
			if err != nil {
				return err
			}
			now := a.now()
			if dryRun {
				// The list is the output: held, as it is printed whole.
				res := operate.Result{Action: "redrive", DryRun: true}
				err := operate.EachKey(cmd.Context(), op, keys, sel.Selection, now, func(k string) error {
					res.Keys = append(res.Keys, k)
					return nil
				})
				if err != nil {
					return fmt.Errorf("read dead letters: %w", err)
				}
				return a.report(res, "")
			}
			bar := &progress{w: a.stderr, label: "redrive"}
			redrive := operate.Redrive
			if late {
				redrive = operate.RedriveLate
			}
			res, err := redrive(cmd.Context(), op, keys, sel.Selection, now, bar.step)
			bar.finish()
			if rerr := a.report(res, "redriven"); rerr != nil {
				return rerr
			}
			return err
		},
	}
	cmd.Flags().StringVar(&sel.Queue, "queue", "", "every dead letter of this queue")
	cmd.Flags().BoolVar(&sel.all, "all", false, "every dead letter")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "list what would be redriven, change nothing")
	cmd.Flags().BoolVar(&late, "late", false, "redrive too the dead letters whose place's closing message may have reached the consumer (closed: unsure): each may arrive after its place was closed, recorded late and applied nowhere by a GapWait consumer")
	return cmd
}

func (a *app) deadPurgeCommand() *cobra.Command {
	var sel selection
	var yes bool
	cmd := &cobra.Command{
		Use:   "purge (KEY...|--queue Q|--all) [--older-than DUR] --yes",
		Short: "Delete dead letters for good",
		Long: "Purge deletes only rows that are failed, and refuses to run without --yes. " +
			"It holds back a dead letter a send of which ended unsure (a timeout, a crash) until no copy of it can land: " +
			"the dispatcher's published unsure wait after its unsure_at (else the longest any dispatcher has, 21m). " +
			"On an ordered route a purged head lets its group go at once; a copy landing later would arrive behind its successors.",
		RunE: func(cmd *cobra.Command, keys []string) error {
			if !yes {
				return usagef("purge deletes dead letters for good: add --yes to confirm")
			}
			if err := checkSelection(keys, sel); err != nil {
				return err
			}
			op, err := a.operator(cmd.Context())
			if err != nil {
				return err
			}
			published, err := a.unsureWait(cmd.Context())
			if err != nil {
				return err
			}
			bar := &progress{w: a.stderr, label: "purge"}
			now := a.now()
			res, err := operate.Purge(cmd.Context(), op, keys, sel.Selection, now, operate.Hold{Now: now, Wait: operate.HoldWait(published)}, bar.step)
			bar.finish()
			if rerr := a.report(res, "purged"); rerr != nil {
				return rerr
			}
			return err
		},
	}
	cmd.Flags().StringVar(&sel.Queue, "queue", "", "dead letters of this queue")
	durationVar(cmd.Flags(), &sel.OlderThan, "older-than", 0, "only those failed longer ago than this, e.g. 30d")
	cmd.Flags().BoolVar(&sel.all, "all", false, "every dead letter")
	cmd.Flags().BoolVar(&yes, "yes", false, "confirm the deletion")
	return cmd
}
