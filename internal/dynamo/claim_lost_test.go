package dynamo_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
	"github.com/outflowhq/outflow/internal/sdkhttp"
)

// A claim whose answer is lost on the way back has applied; the SDK sends
// it again, and the retry's condition fails on the claim itself. Taken
// for another worker's claim, it held the row, and on an ordered route
// its whole group, until the lease lapsed (five minutes by default) with
// nobody to send it. The store knows its own claim by the token it wrote.
func TestStore_AClaimWhoseAnswerWasLostIsTheClaimersWhenTheSDKSendsItAgain(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// lapsed has another worker claim the row first, its lease then
		// lapsed: the claim is the second UpdateItem, after the refusal
		// of the first (the row is not pending).
		lapsed bool
	}{
		{"a pending row", false},
		{"a row whose claim lapsed", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			table := awstest.NewTable(t)
			other, err := dynamo.New(awstest.DynamoDB(t), dynamo.Config{Table: table, Shards: 4})
			require.NoError(t, err)
			stage(t, other, "k")
			now, nth, attempt := t0, 1, 1
			if tc.lapsed {
				_, err := other.Claim(ctx, "k", t0, lease, maxAttempts)
				require.NoError(t, err)
				now, nth, attempt = t0.Add(2*lease), 2, 2
			}
			cfg := awstest.TestConfig(t)
			transport := awstest.LoseAnswer("UpdateItem", nth)
			cfg.HTTPClient = sdkhttp.Client(&http.Client{Transport: transport})
			s, err := dynamo.New(dynamodb.NewFromConfig(cfg), dynamo.Config{Table: table, Shards: 4})
			require.NoError(t, err)

			row, err := s.Claim(ctx, "k", now, lease, maxAttempts)
			require.True(t, transport.Lost(), "the claim's answer was lost, and the SDK sent it again")
			require.NoError(t, err, "the retry found the claim applied: it is this claimer's")
			require.Equal(t, outbox.StatusClaimed, row.Status)
			require.Equal(t, attempt, row.Attempt, "one claim, one attempt")
			require.Equal(t, tc.lapsed, !row.UnsureAt.IsZero(), "a claim that takes over a lapsed one says its send may have landed")
			stored, err := other.Get(ctx, "k")
			require.NoError(t, err)
			require.Equal(t, row.Token, stored.Token, "the row is held under the token the claimer has")
			require.Equal(t, now.Add(lease).UnixMilli(), stored.LeaseUntil.UnixMilli())
		})
	}
}
