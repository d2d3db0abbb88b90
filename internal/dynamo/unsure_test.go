package dynamo_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/outbox"
)

// TestDeadLetter_MarksALastAttemptOfUnknownOutcomeForTheHeadCheck: the
// head check reads whether a dead letter's last attempt ended unsure, so
// that under skip its group waits until no copy of it can land. A definite
// last failure leaves no mark, an expire keeps the history's, and a
// redrive clears it.
func TestDeadLetter_MarksALastAttemptOfUnknownOutcomeForTheHeadCheck(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		settle func(s storeSettler, row outbox.Row, hist []outbox.AttemptError) error
		unsure bool
	}{
		{"dead-lettered after a timeout", func(s storeSettler, row outbox.Row, h []outbox.AttemptError) error {
			return s.DeadLetter(context.Background(), row, t0, h)
		}, true},
		{"dead-lettered after a refusal", func(s storeSettler, row outbox.Row, h []outbox.AttemptError) error {
			return s.DeadLetter(context.Background(), row, t0, h)
		}, false},
		{"expired with a lapsed lease", func(s storeSettler, row outbox.Row, h []outbox.AttemptError) error {
			return s.Expire(context.Background(), row, t0.Add(2*lease), 1, h)
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := newStore(t, 0)
			stage(t, s, "p")
			row := claim(t, s, "p", t0)
			hist := []outbox.AttemptError{{At: t0, Attempt: 1, Message: "first", Unsure: !tt.unsure}, {At: t0, Attempt: 1, Message: "last", Unsure: tt.unsure}}
			require.NoError(t, tt.settle(s, row, hist))

			l, err := s.Link(ctx, "p")
			require.NoError(t, err)
			require.Equal(t, outbox.StatusFailed, l.Status)
			require.Equal(t, tt.unsure, l.Unsure)
			require.Equal(t, tt.unsure, get(t, s, "p").Errors[1].Unsure, "the history keeps each attempt's mark")

			require.NoError(t, s.Redrive(ctx, "p", t0.Add(time.Hour)))
			l, err = s.Link(ctx, "p")
			require.NoError(t, err)
			require.False(t, l.Unsure, "a redriven row starts afresh")
		})
	}
}

// storeSettler is the part of the store the table above settles with.
type storeSettler interface {
	DeadLetter(ctx context.Context, row outbox.Row, now time.Time, history []outbox.AttemptError) error
	Expire(ctx context.Context, row outbox.Row, now time.Time, maxAttempts int, history []outbox.AttemptError) error
}
