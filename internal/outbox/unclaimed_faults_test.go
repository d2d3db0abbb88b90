package outbox_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/faults"
	"github.com/outflowhq/outflow/internal/outbox"
)

// The promises of the wake's claim-free path under injected faults,
// against the moto server: see docs/reliability.md, "The wake's
// claim-free path".

// wakeGracePolicy is testPolicy with the wake on.
func wakeGracePolicy() outbox.Policy {
	p := testPolicy()
	p.WakeGrace = 15 * time.Second
	return p
}

// imageRef is the wake's ref of a staged row, with its stream image (the
// row as stored now, before anyone touched it).
func (h *harness) imageRef(t *testing.T, key string) outbox.DueRef {
	t.Helper()
	row := h.row(t, key)
	return outbox.DueRef{Key: key, Queue: row.Queue, Linked: true, Image: &row}
}

// accepted records every send a target accepted, by key, with its payload;
// before runs first on each Deliver, as a fault that falls inside the send.
type accepted struct {
	next   outbox.Deliverer
	before func(ctx context.Context)
	mu     sync.Mutex
	sends  map[string][]string
}

func newAccepted(next outbox.Deliverer) *accepted {
	return &accepted{next: next, sends: map[string][]string{}}
}

func (a *accepted) Deliver(ctx context.Context, queue string, rows []outbox.Row) []error {
	if a.before != nil {
		a.before(ctx)
	}
	errs := a.next.Deliver(ctx, queue, rows)
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, row := range rows {
		if i < len(errs) && errs[i] == nil {
			a.sends[row.Key] = append(a.sends[row.Key], string(row.Payload))
		}
	}
	return errs
}

func (a *accepted) of(key string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.sends[key]...)
}

// crashing sends as next does, then crashes the invocation: its context
// ends before any settle, as when the function dies after the send.
type crashing struct {
	next  outbox.Deliverer
	crash context.CancelFunc
}

func (c crashing) Deliver(ctx context.Context, queue string, rows []outbox.Row) []error {
	errs := c.next.Deliver(context.WithoutCancel(ctx), queue, rows)
	c.crash()
	return errs
}

func TestWakeUnclaimed_AFailedSendSpendsTheRowsBudget(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	p := wakeGracePolicy()
	h.stage(t, outbox.Row{Key: "k", Queue: "orders", Payload: []byte(`{}`)})
	failing := faults.Refuse{Next: h.sqs, Fail: func(outbox.Row) error { return errors.New("injected: target down") }}
	sends := newAccepted(failing)
	var tries int
	counted := faults.Refuse{Next: sends, Fail: func(outbox.Row) error { tries++; return nil }}
	e := h.engine(t, p, counted)

	res, err := e.DeliverRefs(ctx, []outbox.DueRef{h.imageRef(t, "k")})
	require.NoError(t, err)
	require.Equal(t, 1, res.Unclaimed)
	require.Equal(t, 1, res.Retried)
	row := h.row(t, "k")
	require.Equal(t, outbox.StatusPending, row.Status)
	require.Equal(t, 1, row.Attempt, "the unclaimed send's failure is counted")
	require.Len(t, row.Errors, 1)

	for range 10 {
		h.clock.Advance(p.BackoffMax)
		_, err := e.Sweep(ctx)
		require.NoError(t, err)
	}
	row = h.row(t, "k")
	require.Equal(t, outbox.StatusFailed, row.Status)
	require.Equal(t, p.MaxAttempts, row.Attempt)
	require.Equal(t, p.MaxAttempts, tries, "the wake's attempt was one of the budget's, not one more")
}

// TestWakeUnclaimed_APoisonRowThatCrashesTheFunctionDeadLetters is a row
// whose every send kills the function before its settle: the stream's
// retries of the wake's batch send it again, uncounted, but only inside
// the wake grace; past it, every attempt is a claim that counts, and the
// lapsed claims spend the budget.
func TestWakeUnclaimed_APoisonRowThatCrashesTheFunctionDeadLetters(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	p := wakeGracePolicy()
	h.stage(t, outbox.Row{Key: "poison", Queue: "orders", Payload: []byte(`{}`)})
	ref := h.imageRef(t, "poison") // every stream retry carries the same image
	sends := newAccepted(h.sqs)
	invoke := func(wake bool) {
		ctx, crash := context.WithCancel(context.Background())
		defer crash()
		e := h.engine(t, p, crashing{next: sends, crash: crash})
		if wake {
			_, _ = e.DeliverRefs(ctx, []outbox.DueRef{ref})
			return
		}
		_, _ = e.Sweep(ctx)
	}
	// The wake's invocation and the stream's retries of it, inside the
	// grace, where the sweep leaves the row alone.
	inGrace := 0
	for h.clock.Now().Sub(ref.Image.CreatedAt) < p.WakeGrace {
		invoke(true)
		invoke(false)
		inGrace++
		h.clock.Advance(5 * time.Second)
	}
	require.Equal(t, 0, h.row(t, "poison").Attempt, "crashes before the settle recorded nothing")
	// Past the grace: more retries of the wake's batch, and the sweeps.
	for range 3 * p.MaxAttempts {
		invoke(true)
		invoke(false)
		h.clock.Advance(p.Lease + time.Second)
	}
	row := h.row(t, "poison")
	require.Equal(t, outbox.StatusFailed, row.Status, "the poison row is dead-lettered")
	require.Equal(t, p.MaxAttempts, row.Attempt)
	require.Contains(t, row.LastError, "lease expired")
	require.LessOrEqual(t, len(sends.of("poison")), inGrace+p.MaxAttempts,
		"sent uncounted only by the invocations inside the grace (%d), then once per counted attempt", inGrace)
}

// TestWakeUnclaimed_ASweepClaimBetweenSendAndSettleWins is the race of
// the wake's send with a sweep that claims the row once the grace is
// past: the wake's settle is refused, and the row is never lost, only
// sent twice.
func TestWakeUnclaimed_ASweepClaimBetweenSendAndSettleWins(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		sweepErr  error
		wantState outbox.Status // "" if gone
		wakeErr   error
		// crash ends the sweep after its send, before its settle: its
		// claim is still held at the wake's settle.
		crash bool
	}{
		{"the sweep delivers it", nil, "", nil, false},
		{"the sweep's attempt is in flight", nil, outbox.StatusClaimed, nil, true},
		{"the sweep's attempt is in flight and the wake's send fails", nil, outbox.StatusClaimed, errors.New("injected: reset"), true},
		{"the sweep's send fails: its retry stands", errors.New("injected: throttled"), outbox.StatusPending, nil, false},
		{"the sweep's send fails and the wake's too: the sweep's retry stands", errors.New("injected: throttled"), outbox.StatusPending, errors.New("injected: reset"), false},
		{"the sweep's send fails for good: its dead letter stands", outbox.Permanent(errors.New("injected: refused")), outbox.StatusFailed, errors.New("injected: reset"), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			ctx := context.Background()
			p := wakeGracePolicy()
			h.stage(t, outbox.Row{Key: "k", Queue: "orders", Payload: []byte(`{}`)})
			ref := h.imageRef(t, "k")
			sweepSends := newAccepted(faults.Refuse{Next: h.sqs, Fail: func(outbox.Row) error { return tc.sweepErr }})
			sweepCtx, crash := context.WithCancel(ctx)
			defer crash()
			var sweepDeliverer outbox.Deliverer = sweepSends
			if tc.crash {
				sweepDeliverer = crashing{next: sweepSends, crash: crash}
			}
			sweep := h.engine(t, p, sweepDeliverer)
			var swept outbox.Result
			var sweepErr error
			wakeSends := newAccepted(faults.Refuse{Next: h.sqs, Fail: func(outbox.Row) error { return tc.wakeErr }})
			wakeSends.before = func(context.Context) {
				// The wake's send is slow: the grace passes and a sweep
				// claims, sends and settles the row meanwhile.
				h.clock.Advance(p.WakeGrace)
				swept, sweepErr = sweep.Sweep(sweepCtx)
				if tc.crash {
					sweepErr = nil // the crash's own error
				}
			}
			res, err := h.engine(t, p, wakeSends).DeliverRefs(ctx, []outbox.DueRef{ref})
			require.NoError(t, err)
			require.NoError(t, sweepErr)
			require.Equal(t, 1, swept.Claimed, "the sweep claimed the row during the wake's send")
			require.Equal(t, 1, res.Unclaimed)
			require.Equal(t, 1, res.Conflicts, "the wake's settle was refused")
			got, err := h.store.Get(ctx, "k")
			require.NoError(t, err)
			if tc.wantState == "" {
				require.Nil(t, got)
				require.Len(t, append(wakeSends.of("k"), sweepSends.of("k")...), 2, "sent twice, by the wake and the sweep")
				return
			}
			require.NotNil(t, got, "the wake's settle did not touch the sweep's attempt")
			require.Equal(t, tc.wantState, got.Status)
			require.Equal(t, 1, got.Attempt, "the sweep's attempt, not overwritten by the wake's")
			if tc.crash {
				require.Empty(t, got.Errors, "the wake's failure did not overwrite the claim")
				return
			}
			require.Contains(t, got.LastError, "injected: ")
			require.NotContains(t, got.LastError, "reset", "the history is the sweep's")
		})
	}
}

// TestWakeUnclaimed_AStaleInvocationNeverSettlesTheKeysNextRow is a
// duplicate wake invocation (the stream delivered its record twice) that
// runs after the row was delivered and its key staged again: it sends its
// stale image again (a duplicate of the delivered row), and its settle
// leaves the new row to be delivered.
func TestWakeUnclaimed_AStaleInvocationNeverSettlesTheKeysNextRow(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	p := wakeGracePolicy()
	h.stage(t, outbox.Row{Key: "k", Queue: "orders", Payload: []byte(`{"v":1}`)})
	stale := h.imageRef(t, "k")
	sends := newAccepted(h.sqs)
	e := h.engine(t, p, sends)

	res, err := e.DeliverRefs(ctx, []outbox.DueRef{stale})
	require.NoError(t, err)
	require.Equal(t, 1, res.Delivered)
	h.gone(t, "k")

	h.clock.Advance(time.Millisecond)
	h.stage(t, outbox.Row{Key: "k", Queue: "orders", Payload: []byte(`{"v":2}`)})
	res, err = e.DeliverRefs(ctx, []outbox.DueRef{stale})
	require.NoError(t, err)
	require.Equal(t, 1, res.Conflicts, "the stale invocation's settle was refused")
	require.Equal(t, []string{`{"v":1}`, `{"v":1}`}, sends.of("k"))
	require.Equal(t, `{"v":2}`, string(h.row(t, "k").Payload), "the key's next row is still there")

	res, err = e.DeliverRefs(ctx, []outbox.DueRef{h.imageRef(t, "k")})
	require.NoError(t, err)
	require.Equal(t, 1, res.Delivered)
	require.Equal(t, []string{`{"v":1}`, `{"v":1}`, `{"v":2}`}, sends.of("k"), "the next row was delivered, by its own record")
	h.gone(t, "k")
}
