package faults

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/outflowhq/outflow/internal/outbox"
)

// Crasher wraps one sweep's store and crashes the sweep: once it has made
// CrashAfter claims (0: never) it calls Crash, which cancels the sweep's
// context. The crash falls by count, not by a timer, so a seed decides
// where. It tracks the rows claimed and not settled done, which the crash
// may have left mid-flight (sent, but not settled: sent again later).
type Crasher struct {
	outbox.Store
	CrashAfter int
	Crash      context.CancelFunc

	mu      sync.Mutex
	claimed map[string]bool
	claims  int
}

// Claim implements outbox.Store.
func (s *Crasher) Claim(ctx context.Context, key string, now time.Time, lease time.Duration, max int) (outbox.Row, error) {
	row, err := s.Store.Claim(ctx, key, now, lease, max)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		if s.claimed == nil {
			s.claimed = map[string]bool{}
		}
		s.claimed[key] = true
	}
	if s.claims++; s.claims == s.CrashAfter && s.Crash != nil {
		s.Crash()
	}
	return row, err
}

// Done implements outbox.Store.
func (s *Crasher) Done(ctx context.Context, row outbox.Row, now time.Time) error {
	err := s.Store.Done(ctx, row, now)
	if err == nil {
		s.mu.Lock()
		delete(s.claimed, row.Key)
		s.mu.Unlock()
	}
	return err
}

// Claimed returns the keys this store claimed and did not settle done,
// sorted.
func (s *Crasher) Claimed() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]string, 0, len(s.claimed))
	for k := range s.claimed {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
