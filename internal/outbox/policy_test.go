package outbox

import (
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestBackoff_GrowsGeometricallyAndClamps(t *testing.T) {
	t.Parallel()
	p := Policy{BackoffBase: 100 * time.Millisecond, BackoffMultiplier: 2, BackoffMax: 60 * time.Second}
	tests := []struct {
		attempt int
		want    time.Duration
	}{
		{0, 100 * time.Millisecond}, // defensive: treated as the first
		{1, 100 * time.Millisecond},
		{2, 200 * time.Millisecond},
		{3, 400 * time.Millisecond},
		{10, 51200 * time.Millisecond},
		{11, 60 * time.Second},
		{64, 60 * time.Second},
		{math.MaxInt32, 60 * time.Second},
		{math.MaxInt, 60 * time.Second},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, p.Backoff(tt.attempt), "attempt %d", tt.attempt)
	}
}

func TestBackoff_SaturatesInsteadOfOverflowing(t *testing.T) {
	t.Parallel()
	p := Policy{BackoffBase: time.Duration(math.MaxInt64 / 3), BackoffMultiplier: 1000, BackoffMax: time.Duration(math.MaxInt64)}
	require.Equal(t, time.Duration(math.MaxInt64), p.Backoff(5))
	flat := Policy{BackoffBase: time.Second, BackoffMultiplier: 1, BackoffMax: time.Hour}
	require.Equal(t, time.Second, flat.Backoff(1_000_000))
}

func TestJitter_StaysWithinBounds(t *testing.T) {
	t.Parallel()
	p := Policy{Jitter: 0.2}
	d := 10 * time.Second
	lo, hi := 8*time.Second, 12*time.Second
	var below, above bool
	for range 2000 {
		j := p.jittered(d)
		require.GreaterOrEqual(t, j, lo)
		require.LessOrEqual(t, j, hi)
		below, above = below || j < d, above || j > d
	}
	require.True(t, below && above, "jitter goes both ways")
	require.Equal(t, d, Policy{}.jittered(d))
}

func TestPolicy_ValidateNamesEachBadField(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		mutate func(*Policy)
		want   string
	}{
		{"max attempts", func(p *Policy) { p.MaxAttempts = 0 }, "MaxAttempts must be at least 1, got 0"},
		{"max attempts high", func(p *Policy) { p.MaxAttempts = MaxAttemptsLimit + 1 }, "MaxAttempts must be at most 1000"},
		{"backoff max huge", func(p *Policy) { p.BackoffMax = math.MaxInt64 }, "BackoffMax must be at most 8760h0m0s"},
		{"linger over lease", func(p *Policy) { p.BatchLinger = p.Lease }, "BatchLinger must be at most the lease (5m0s) less 3s"},
		{"linger leaves calls no time", func(p *Policy) { p.Lease, p.BatchLinger = 30*time.Second, 29999*time.Millisecond },
			"BatchLinger must be at most the lease (30s) less 3s: each AWS call gets (lease − linger) / 3, and needs at least 1s"},
		{"lease over the longest", func(p *Policy) { p.Lease = MaxLease + time.Second }, "Lease must be at most 1h0m0s"},
		{"backoff base", func(p *Policy) { p.BackoffBase = 0 }, "BackoffBase must be positive"},
		{"multiplier", func(p *Policy) { p.BackoffMultiplier = 0 }, "BackoffMultiplier must be at least 1"},
		{"max below base", func(p *Policy) { p.BackoffMax = p.BackoffBase / 2 }, "BackoffMax must be at least the backoff base"},
		{"jitter", func(p *Policy) { p.Jitter = 1 }, "Jitter must be in [0, 1)"},
		{"negative jitter", func(p *Policy) { p.Jitter = -0.1 }, "Jitter must be in [0, 1)"},
		{"lease", func(p *Policy) { p.Lease = 0 }, "Lease must be positive"},
		{"grace", func(p *Policy) { p.WakeGrace = -time.Second }, "WakeGrace must not be negative"},
		{"page size", func(p *Policy) { p.PageSize = 0 }, "PageSize must be in [1, 1000]"},
		{"page size high", func(p *Policy) { p.PageSize = 1001 }, "PageSize must be in [1, 1000]"},
		{"concurrency", func(p *Policy) { p.Concurrency = 0 }, "Concurrency must be in [1, 256]"},
		{"margin", func(p *Policy) { p.DeadlineMargin = -1 }, "DeadlineMargin must not be negative"},
		{"budget", func(p *Policy) { p.RowBudget = 0 }, "RowBudget must be at least 1"},
		{"linger", func(p *Policy) { p.BatchLinger = -1 }, "BatchLinger must not be negative"},
	}
	require.NoError(t, DefaultPolicy().Validate())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := DefaultPolicy()
			tt.mutate(&p)
			require.ErrorContains(t, p.Validate(), tt.want)
		})
	}
}

func TestJitter_SaturatesInsteadOfOverflowing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		d    time.Duration
	}{
		{"largest duration", math.MaxInt64},
		{"largest valid backoff", MaxBackoff},
		{"half the largest duration", math.MaxInt64 / 2},
	}
	for _, tt := range tests {
		p := Policy{Jitter: 0.99}
		for range 500 {
			j := p.jittered(tt.d)
			require.GreaterOrEqual(t, j, time.Duration(0), "%s: a retry never falls due in the past", tt.name)
			require.LessOrEqual(t, j, 2*MaxBackoff, tt.name)
		}
	}
}

func TestPolicy_CallTimeoutFitsClaimSendAndSettleInTheLease(t *testing.T) {
	t.Parallel()
	p := DefaultPolicy()
	require.LessOrEqual(t, 3*p.CallTimeout()+p.BatchLinger, p.Lease)
	require.Positive(t, p.CallTimeout())
}

func TestTruncateError_CutsAtACharacterBoundary(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, msg string }{
		{"short", "boom"},
		{"ascii", strings.Repeat("a", 3*MaxErrorBytes)},
		{"two-byte", strings.Repeat("é", MaxErrorBytes)},
		{"three-byte", strings.Repeat("€", MaxErrorBytes)},
	}
	for _, tt := range tests {
		got := TruncateError(tt.msg)
		require.LessOrEqual(t, len(got), MaxErrorBytes, tt.name)
		require.True(t, utf8.ValidString(got), tt.name)
		require.True(t, strings.HasPrefix(tt.msg, strings.TrimSuffix(got, "…")), tt.name)
	}
	require.Equal(t, "boom", TruncateError("boom"))
}

func TestPolicy_CheckDeadlineWantsLeaseLongerThanTimeout(t *testing.T) {
	t.Parallel()
	p := DefaultPolicy()
	require.NoError(t, p.CheckDeadline(time.Minute))
	require.ErrorContains(t, p.CheckDeadline(p.Lease), "lease (5m0s) must be longer than the invocation timeout (5m0s)")
	require.ErrorContains(t, p.CheckDeadline(5*time.Second), "deadline margin (10s) must be shorter")
}

func TestRow_ErrorHistoryKeepsTheLastFew(t *testing.T) {
	t.Parallel()
	var r Row
	for i := 1; i <= errorHistory+3; i++ {
		r.Errors = r.withError(AttemptError{Attempt: i})
	}
	require.Len(t, r.Errors, errorHistory)
	require.Equal(t, 4, r.Errors[0].Attempt)
	require.Equal(t, errorHistory+3, r.Errors[errorHistory-1].Attempt)
}

func TestRow_Expirable(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	tests := []struct {
		name string
		row  Row
		want bool
	}{
		{"claimed, lease lapsed, at budget", Row{Status: StatusClaimed, Attempt: 3, LeaseUntil: now.Add(-time.Second)}, true},
		{"claimed, lease live, at budget", Row{Status: StatusClaimed, Attempt: 3, LeaseUntil: now.Add(time.Second)}, false},
		{"claimed, lease lapsed, below budget", Row{Status: StatusClaimed, Attempt: 2, LeaseUntil: now.Add(-time.Second)}, false},
		{"pending, due, over budget", Row{Status: StatusPending, Attempt: 4, DueAt: now}, true},
		{"pending, not due, over budget", Row{Status: StatusPending, Attempt: 4, DueAt: now.Add(time.Second)}, false},
		{"failed", Row{Status: StatusFailed, Attempt: 3}, false},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, tt.row.expirable(now, 3), tt.name)
	}
}
