package cli

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

func (a *app) deadCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dead",
		Short: "Inspect, redrive and purge dead letters (rows Outflow could not deliver)",
	}
	cmd.AddCommand(a.deadListCommand(), a.deadShowCommand(), a.deadRedriveCommand(), a.deadPurgeCommand())
	return groupCommand(cmd)
}

// deadLetter is a dead letter as dead list prints it: with its group, and
// whether it holds the later rows of its ordered group.
type deadLetter struct {
	dynamo.DeadRef
	BlocksGroup bool `json:"blocks_group"`
}

func (a *app) deadListCommand() *cobra.Command {
	var queue string
	var since time.Duration
	var limit int
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List dead letters, newest first, marking those that block their ordered group",
		Long: "A dead letter blocks its ordered group when it has a place in one (seq) and its route's dead-head policy is block " +
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
			refs, err := op.ListDead(cmd.Context(), q, limit)
			if err != nil {
				return fmt.Errorf("list dead letters: %w", err)
			}
			if refs, err = op.WithGroups(cmd.Context(), refs); err != nil {
				return fmt.Errorf("list dead letters: %w", err)
			}
			dead := make([]deadLetter, len(refs))
			for i, d := range refs {
				dead[i] = deadLetter{DeadRef: d, BlocksGroup: outbox.DeadLetterBlocks(ordered, d.Link())}
			}
			return a.emit(dead, func(w io.Writer) {
				fmt.Fprintln(w, "KEY\tQUEUE\tGROUP\tATTEMPTS\tFAILED\tBLOCKS\tLAST ERROR")
				for _, d := range dead {
					fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", d.Key, d.Queue, orDash(d.Group), d.Attempt, when(d.FailedAt),
						yesOrDash(d.BlocksGroup), shorten(d.LastError, 60))
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

// attemptError is one failed attempt of a row's error history, as dead
// show prints it.
type attemptError struct {
	At      time.Time `json:"at"`
	Attempt int       `json:"attempt"`
	Message string    `json:"message"`
	// Unsure says the attempt's outcome is unknown (outbox.AttemptError).
	Unsure bool `json:"unsure"`
}

// shownRow is a row as dead show prints it: the payload only on request.
type shownRow struct {
	Key          string            `json:"key"`
	Queue        string            `json:"queue"`
	Status       outbox.Status     `json:"status"`
	Attempts     int               `json:"attempts"`
	Group        string            `json:"group,omitempty"`
	Seq          int64             `json:"seq,omitempty"`
	BlocksGroup  bool              `json:"blocks_group"`
	Attributes   map[string]string `json:"attributes,omitempty"`
	CreatedAt    time.Time         `json:"created_at,omitzero"`
	DueAt        time.Time         `json:"due_at,omitzero"`
	FailedAt     time.Time         `json:"failed_at,omitzero"`
	LastError    string            `json:"last_error,omitempty"`
	Errors       []attemptError    `json:"errors"`
	PayloadBytes int               `json:"payload_bytes"`
	Payload      *string           `json:"payload,omitempty"`
	Encoding     string            `json:"payload_encoding,omitempty"`
	Malformed    string            `json:"malformed,omitempty"`
}

func (a *app) deadShowCommand() *cobra.Command {
	var payload bool
	cmd := &cobra.Command{
		Use:   "show KEY",
		Short: "Show one row with its error history (the payload only with --payload), and whether it blocks its ordered group",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, keys []string) error {
			ordered, err := a.ordered(cmd.Context())
			if err != nil {
				return err
			}
			op, err := a.operator(cmd.Context())
			if err != nil {
				return err
			}
			row, derr := op.Get(cmd.Context(), keys[0])
			if row == nil && derr == nil {
				return fmt.Errorf("no row with key %q in %s", keys[0], a.table)
			}
			if row == nil {
				return fmt.Errorf("show dead letter: %w", derr)
			}
			s := shownRow{
				Key: row.Key, Queue: row.Queue, Status: row.Status, Attempts: row.Attempt, Group: row.Group, Seq: row.Seq,
				BlocksGroup: row.Status == outbox.StatusFailed && outbox.DeadLetterBlocks(ordered, outbox.Link{Queue: row.Queue, Seq: row.Seq}),
				Attributes:  row.Attributes, CreatedAt: row.CreatedAt, DueAt: row.DueAt, FailedAt: row.FailedAt,
				LastError: row.LastError, Errors: make([]attemptError, len(row.Errors)), PayloadBytes: len(row.Payload),
			}
			for i, e := range row.Errors {
				s.Errors[i] = attemptError{At: e.At, Attempt: e.Attempt, Message: e.Message, Unsure: e.Unsure}
			}
			if derr != nil {
				s.Malformed = derr.Error()
			}
			if payload {
				text, enc := string(row.Payload), ""
				if !utf8.Valid(row.Payload) {
					text, enc = base64.StdEncoding.EncodeToString(row.Payload), "base64"
				}
				s.Payload, s.Encoding = &text, enc
			}
			return a.emit(s, func(w io.Writer) { printRow(w, s) })
		},
	}
	cmd.Flags().BoolVar(&payload, "payload", false, "also print the payload")
	a.orderedFlag(cmd)
	return cmd
}

func printRow(w io.Writer, s shownRow) {
	fmt.Fprintf(w, "key\t%s\n", s.Key)
	fmt.Fprintf(w, "queue\t%s\n", s.Queue)
	fmt.Fprintf(w, "status\t%s\n", s.Status)
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
	fmt.Fprintf(w, "created\t%s\n", when(s.CreatedAt))
	if !s.FailedAt.IsZero() {
		fmt.Fprintf(w, "failed\t%s\n", when(s.FailedAt))
	} else {
		fmt.Fprintf(w, "due\t%s\n", when(s.DueAt))
	}
	fmt.Fprintf(w, "attributes\t%d\n", len(s.Attributes))
	if s.Malformed != "" {
		fmt.Fprintf(w, "malformed\t%s\n", s.Malformed)
	}
	if s.Payload != nil {
		fmt.Fprintf(w, "payload\t%s\n", *s.Payload)
	} else {
		fmt.Fprintf(w, "payload\t(%d bytes; --payload to show)\n", s.PayloadBytes)
	}
	fmt.Fprintf(w, "errors\t%d\n", len(s.Errors))
	for _, e := range s.Errors {
		fmt.Fprintf(w, "  #%d\t%s  %s\n", e.Attempt, when(e.At), oneLine(e.Message))
	}
}

// selection is the rows a bulk command acts on: keys, a queue, or all.
type selection struct {
	queue     string
	all       bool
	olderThan time.Duration
}

// eachKey calls fn with each key of the rows named: the keys given, or
// the dead letters of a queue or of all, page by page as the dead index
// is read, so that no list of them all is ever held.
func (a *app) eachKey(ctx context.Context, op *dynamo.Operator, keys []string, sel selection, fn func(string) error) error {
	if len(keys) > 0 {
		for _, k := range keys {
			if err := fn(k); err != nil {
				return err
			}
		}
		return nil
	}
	// Only rows dead before the run began: a row redriven here that fails
	// again comes back with a later failed_at, behind the scan's cursor,
	// and would be taken again, and again (found by review 17c).
	q := dynamo.DeadQuery{Queue: sel.queue, Before: a.now()}
	if sel.olderThan > 0 {
		q.Before = q.Before.Add(-sel.olderThan)
	}
	return op.EachDead(ctx, q, func(d dynamo.DeadRef) error { return fn(d.Key) })
}

// checkSelection refuses a selection that is not exactly one of keys,
// --queue and --all.
func checkSelection(keys []string, sel selection) error {
	n := 0
	for _, set := range []bool{len(keys) > 0, sel.queue != "", sel.all} {
		if set {
			n++
		}
	}
	if n != 1 {
		return usagef("name the rows: KEY..., --queue Q or --all (exactly one)")
	}
	if sel.olderThan < 0 {
		return usagef("--older-than must not be negative, got %s", sel.olderThan)
	}
	if len(keys) > 0 && sel.olderThan > 0 {
		return usagef("--older-than applies to --queue or --all, not to keys")
	}
	return nil
}

// bulkResult is what redrive and purge report.
type bulkResult struct {
	Action  string   `json:"action"`
	DryRun  bool     `json:"dry_run,omitempty"`
	Done    int      `json:"done"`
	Skipped int      `json:"skipped"`
	Keys    []string `json:"keys,omitempty"`
	// OlderThan is --older-than, when given: younger dead letters were
	// not selected, and the report says so rather than let a 0 look like
	// an empty table.
	OlderThan string `json:"older_than,omitempty"`
}

// apply runs op on every key each gives (8 at a time, as each reads
// them), counting refused writes as skipped (the row was not a dead
// letter), with a progress line for more than one key. The keys stream
// from each to the workers: memory stays the same whatever their number.
// An error reading the keys stops the run; errors of op do not.
func (a *app) apply(ctx context.Context, action string, each func(fn func(string) error) error, op func(context.Context, string) error) (bulkResult, error) {
	res := bulkResult{Action: action}
	var mu sync.Mutex
	var errs []error
	bar := &progress{w: a.stderr, label: action}
	keys := make(chan string)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for k := range keys {
				err := op(ctx, k)
				mu.Lock()
				var conflict *outbox.ConflictError
				switch {
				case err == nil:
					res.Done++
				case errors.As(err, &conflict):
					res.Skipped++
				default:
					errs = append(errs, err)
				}
				bar.step()
				mu.Unlock()
			}
		})
	}
	err := each(func(k string) error {
		select {
		case keys <- k:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	close(keys)
	wg.Wait()
	bar.finish()
	if err != nil {
		errs = append([]error{fmt.Errorf("read dead letters: %w", err)}, errs...)
	}
	return res, errors.Join(errs...)
}

func (a *app) report(res bulkResult, past string) error {
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
	})
}

func (a *app) deadRedriveCommand() *cobra.Command {
	var sel selection
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "redrive (KEY...|--queue Q|--all)",
		Short: "Return dead letters to pending with a fresh attempt budget, due now",
		Long:  "Redrive is conditional: only rows that are still failed move; others are counted as skipped.",
		RunE: func(cmd *cobra.Command, keys []string) error {
			if err := checkSelection(keys, sel); err != nil {
				return err
			}
			op, err := a.operator(cmd.Context())
			if err != nil {
				return err
			}
			each := func(fn func(string) error) error { return a.eachKey(cmd.Context(), op, keys, sel, fn) }
			if dryRun {
				// The list is the output: held, as it is printed whole.
				res := bulkResult{Action: "redrive", DryRun: true}
				err := each(func(k string) error {
					res.Keys = append(res.Keys, k)
					return nil
				})
				if err != nil {
					return fmt.Errorf("read dead letters: %w", err)
				}
				return a.report(res, "")
			}
			now := a.now()
			res, err := a.apply(cmd.Context(), "redrive", each, func(ctx context.Context, k string) error { return op.Redrive(ctx, k, now) })
			if rerr := a.report(res, "redriven"); rerr != nil {
				return rerr
			}
			return err
		},
	}
	cmd.Flags().StringVar(&sel.queue, "queue", "", "every dead letter of this queue")
	cmd.Flags().BoolVar(&sel.all, "all", false, "every dead letter")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "list what would be redriven, change nothing")
	return cmd
}

func (a *app) deadPurgeCommand() *cobra.Command {
	var sel selection
	var yes bool
	cmd := &cobra.Command{
		Use:   "purge (KEY...|--queue Q|--all) [--older-than DUR] --yes",
		Short: "Delete dead letters for good",
		Long:  "Purge deletes only rows that are failed, and refuses to run without --yes.",
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
			each := func(fn func(string) error) error { return a.eachKey(cmd.Context(), op, keys, sel, fn) }
			res, err := a.apply(cmd.Context(), "purge", each, op.Purge)
			if sel.olderThan > 0 {
				res.OlderThan = sel.olderThan.String()
			}
			if rerr := a.report(res, "purged"); rerr != nil {
				return rerr
			}
			return err
		},
	}
	cmd.Flags().StringVar(&sel.queue, "queue", "", "dead letters of this queue")
	durationVar(cmd.Flags(), &sel.olderThan, "older-than", 0, "only those failed longer ago than this, e.g. 30d")
	cmd.Flags().BoolVar(&sel.all, "all", false, "every dead letter")
	cmd.Flags().BoolVar(&yes, "yes", false, "confirm the deletion")
	return cmd
}
