package interop_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/operate"
	"github.com/outflowhq/outflow/internal/outbox"
)

// action is what the operator does with a dead letter.
type action string

const (
	purge   action = "purge"
	redrive action = "redrive"
)

// deadPlan names the rows the dispatcher's sender refuses for good, and
// what the operator does with each once it is a dead letter.
type deadPlan map[string]action

// planDeadLetters picks refusedPerGroup rows of each group, of any
// producer, at any place: one to be purged, the other redriven.
func planDeadLetters(rng *rand.Rand, groups []string) deadPlan {
	plan := deadPlan{}
	for _, g := range groups {
		picked := map[string]bool{}
		for len(picked) < refusedPerGroup {
			lang := langs[rng.IntN(len(langs))]
			picked[fmt.Sprintf("%s%s-%03d", prefixes[lang], g, rng.IntN(rowsPerGroup))] = true
		}
		keys := slices.Sorted(maps.Keys(picked))
		rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		for i, k := range keys {
			plan[k] = []action{purge, redrive}[i%2]
		}
	}
	return plan
}

// keys are the plan's keys for a, sorted.
func (p deadPlan) keys(a action) []string {
	var keys []string
	for k, v := range p {
		if v == a {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// refusal is the fault the dispatcher's sender is wrapped in
// (faults.Refuse): it refuses each send of a planned row for good, as
// SQS refusing a message for a setting the operator then fixes, until the
// row is fixed (before it is redriven). The message closing the row's
// place goes: it carries none of the row's payload.
type refusal struct {
	plan  deadPlan
	mu    sync.Mutex
	fixed map[string]bool
}

func (r *refusal) fail(row outbox.Row) error {
	if _, ok := r.plan[row.Key]; !ok || row.Closed != "" {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fixed[row.Key] {
		return nil
	}
	return outbox.Permanent(errors.New("refused for good (injected)"))
}

func (r *refusal) fix(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fixed[key] = true
}

// opReport is what the operator did: the rows it purged and redrove, its
// notes for the test's log, or why it stopped.
type opReport struct {
	purged, redriven map[string]bool
	notes            []string
	err              error
}

// operateDeadLetters is the operator: it lists the route's dead letters
// every quarter second, as `outflow dead list` does, and acts on each
// planned one as it appears, through the calls `outflow dead purge` and
// `outflow dead redrive` make (operate.Purge and operate.Redrive, each
// row by its key), until it has acted on all. A redrive refused because
// the row's closing message may have reached the consumer (its send
// ended unsure: a loaded machine) is purged instead, as docs/consuming.md
// says to. A dead letter it did not plan, or one back after its redrive,
// stops it with an error. It runs on a goroutine of its own, and so
// never touches the test's T.
func operateDeadLetters(ctx context.Context, op *dynamo.Operator, plan deadPlan, refusal *refusal, holdWait time.Duration) opReport {
	rep := opReport{purged: map[string]bool{}, redriven: map[string]bool{}}
	note := func(format string, args ...any) { rep.notes = append(rep.notes, fmt.Sprintf(format, args...)) }
	pending := maps.Clone(plan)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	failures := 0
	for len(pending) > 0 {
		select {
		case <-ctx.Done():
			rep.err = ctx.Err()
			return rep
		case <-tick.C:
		}
		refs, err := op.ListDead(ctx, dynamo.DeadQuery{Queue: route}, 0)
		if err != nil {
			if failures++; failures > 20 {
				rep.err = fmt.Errorf("list the dead letters: %w", err)
				return rep
			}
			continue
		}
		failures = 0
		for _, ref := range refs {
			k := ref.Key
			act, ok := pending[k]
			switch {
			case rep.redriven[k]:
				rep.err = fmt.Errorf("%s is a dead letter again after its redrive", k)
				return rep
			case !ok:
				rep.err = fmt.Errorf("%s is a dead letter, and its sender never refused it", k)
				return rep
			}
			now := time.Now()
			switch act {
			case purge:
				res, err := operate.Purge(ctx, op, []string{k}, operate.Selection{}, now, operate.Hold{Now: now, Wait: holdWait}, nil)
				if err != nil {
					rep.err = fmt.Errorf("purge %s: %w", k, err)
					return rep
				}
				if res.Done != 1 {
					note("purge %s: %+v; again later", k, res)
					continue
				}
				rep.purged[k] = true
				delete(pending, k)
			case redrive:
				refusal.fix(k)
				res, err := operate.Redrive(ctx, op, []string{k}, operate.Selection{}, now, nil)
				if err != nil {
					rep.err = fmt.Errorf("redrive %s: %w", k, err)
					return rep
				}
				switch {
				case res.Done == 1:
					rep.redriven[k] = true
					delete(pending, k)
				case res.MayHaveClosed == 1:
					note("redrive %s refused: its closing message may have reached the consumer; purged instead", k)
					pending[k] = purge
				default:
					note("redrive %s: %+v; again later", k, res)
				}
			}
		}
	}
	return rep
}
