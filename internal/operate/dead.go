package operate

import (
	"context"
	"time"

	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

// DeadLetter is a dead letter with its group, and whether it holds the
// later rows of its ordered group.
type DeadLetter struct {
	dynamo.DeadRef
	BlocksGroup bool `json:"blocks_group"`
	// Outcome names how the dead letter ended (OutcomeOf): its closed,
	// read with its group for FIFO routes, tells a dead letter whose
	// place was closed, or purged, from one no message closed.
	Outcome       string `json:"outcome"`
	OutcomeDetail string `json:"outcome_detail"`
}

// ListDead returns up to limit dead letters (0: all) the query selects,
// newest first, each with its group (for FIFO routes, read from the
// table) and whether it blocks it.
func ListDead(ctx context.Context, op *dynamo.Operator, q dynamo.DeadQuery, limit int, ordered map[string]outbox.DeadHead) ([]DeadLetter, error) {
	refs, err := op.ListDead(ctx, q, limit)
	if err != nil {
		return nil, err
	}
	return marked(ctx, op, refs, ordered)
}

func marked(ctx context.Context, op *dynamo.Operator, refs []dynamo.DeadRef, ordered map[string]outbox.DeadHead) ([]DeadLetter, error) {
	refs, err := op.WithGroups(ctx, refs)
	if err != nil {
		return nil, err
	}
	blocks := Blocks(ordered)
	dead := make([]DeadLetter, len(refs))
	for i, d := range refs {
		// Every entry of the dead index is failed. The index projects
		// neither redriven_at nor unsure_at: dead show says more.
		o := ListedOutcome(d.Closed, d.Attempt)
		d.LastError = CodeFirst(d.LastError)
		dead[i] = DeadLetter{DeadRef: d, BlocksGroup: blocks(d), Outcome: o.Name, OutcomeDetail: o.Detail}
	}
	return dead, nil
}

// Page is one page of dead letters, newest first.
type Page struct {
	Dead []DeadLetter
	// Next is the Before of the next page's query; zero on the last page.
	Next time.Time
}

// maxPageReads bounds the reads of the dead index for one filtered page,
// so that a group no dead letter has costs a few requests, not the index.
const maxPageReads = 20

// ListPage returns a page of at most about size dead letters the query
// selects, newest first, keeping those keep accepts (nil: all). A page
// ends on a millisecond: every dead letter that failed in the last one
// shown is on it, so the next page (Before: Next) neither skips nor
// repeats one. It reads the dead index, never the table, except for the
// groups of FIFO routes' dead letters shown.
func ListPage(ctx context.Context, op *dynamo.Operator, q dynamo.DeadQuery, size int, ordered map[string]outbox.DeadHead, keep func(DeadLetter) bool) (Page, error) {
	var page Page
	for range maxPageReads {
		refs, err := op.ListDead(ctx, q, size+1)
		if err != nil {
			return Page{}, err
		}
		more := len(refs) > size
		if more {
			// The rest of the last millisecond shown: dead letters that
			// failed in the same one as the page's last.
			last := refs[size-1].FailedAt
			same, err := op.ListDead(ctx, dynamo.DeadQuery{Queue: q.Queue, Since: last, Before: last.Add(time.Millisecond)}, 0)
			if err != nil {
				return Page{}, err
			}
			refs = append(refs[:size:size], same...)
			refs = dropSeen(refs, size)
			page.Next = last
		} else {
			page.Next = time.Time{}
		}
		dead, err := marked(ctx, op, refs, ordered)
		if err != nil {
			return Page{}, err
		}
		for _, d := range dead {
			if keep == nil || keep(d) {
				page.Dead = append(page.Dead, d)
			}
		}
		if page.Next.IsZero() || len(page.Dead) >= size {
			return page, nil
		}
		q.Before = page.Next
	}
	return page, nil
}

// dropSeen removes, from the dead letters after the first n, those of
// the first n (the same millisecond read twice).
func dropSeen(refs []dynamo.DeadRef, n int) []dynamo.DeadRef {
	seen := make(map[string]bool, n)
	for _, d := range refs[:n] {
		seen[d.Key] = true
	}
	out := refs[:n]
	for _, d := range refs[n:] {
		if !seen[d.Key] {
			seen[d.Key] = true
			out = append(out, d)
		}
	}
	return out
}
