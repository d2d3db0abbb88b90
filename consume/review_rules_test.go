package consume_test

// Adversarial review of the late/closed seams (TestRev_*).

import (
	"context"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/consume"
	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/target"
)

// expireInboxItem deletes a message's inbox item, as the inbox's TTL
// does once it has passed.
func expireInboxItem(t *testing.T, table, consumer, key string) {
	t.Helper()
	_, err := awstest.DynamoDB(t).DeleteItem(context.Background(), &dynamodb.DeleteItemInput{TableName: aws.String(table),
		Key: map[string]types.AttributeValue{consume.AttrPK: &types.AttributeValueMemberS{Value: "inbox " + consumer + " " + key}}})
	require.NoError(t, err)
}

// Under GapWait the cursor never passes a place it did not apply or
// close: a message below the cursor is always one applied already whose
// inbox item expired (the LatePolicy doc names "a copy older than the
// inbox's TTL"). LateApply applies it a second time.
func TestRev_LateApplyAppliesAnExpiredDuplicateAgainUnderGapWait(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	table := newTable(t)
	in, err := consume.NewInbox(awstest.DynamoDB(t), consume.InboxConfig{Table: table, Consumer: "ledger", Gaps: consume.GapWait, Late: consume.LateApply})
	require.NoError(t, err)
	require.NoError(t, in.Apply(ctx, ordered("k1", 1), credit(t, table, "a", "k1", 1)))
	require.NoError(t, in.Apply(ctx, ordered("k2", 2), credit(t, table, "a", "k2", 1)))
	expireInboxItem(t, table, "ledger", "k1")

	err = in.Apply(ctx, ordered("k1", 1), credit(t, table, "a", "k1", 1)) // an old copy of place 1
	t.Logf("old copy of k1: %v", err)
	balance, history := account(t, table, "a")
	require.Equal(t, []string{"k1", "k2"}, history, "k1 was applied once, in its turn; the old copy must not apply it again")
	require.Equal(t, 2, balance)
}

// The same old copy under LateRecord: recorded as a late, never-applied
// message (late_after), though it was applied in its turn. Anyone
// looking for late messages by late_after (as the docs say to) finds an
// applied one.
func TestRev_LateRecordMarksAnAppliedMessageAsLate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	table := newTable(t)
	in, err := consume.NewInbox(awstest.DynamoDB(t), consume.InboxConfig{Table: table, Consumer: "ledger", Gaps: consume.GapWait})
	require.NoError(t, err)
	require.NoError(t, in.Apply(ctx, ordered("k1", 1), credit(t, table, "a", "k1", 1)))
	require.NoError(t, in.Apply(ctx, ordered("k2", 2), credit(t, table, "a", "k2", 1)))
	expireInboxItem(t, table, "ledger", "k1")
	err = in.Apply(ctx, ordered("k1", 1), credit(t, table, "a", "k1", 1))
	require.ErrorIs(t, err, consume.ErrDuplicate, "k1 was applied in its turn: an old copy is a duplicate, not a late message (got %v)", err)
}

// TransactItems is the documented way to put the inbox into one's own
// transaction; a marker's items are a row's, and the effect built from
// the marker's payload commits with them.
func TestRev_TransactItemsTakesAMarkerForARow(t *testing.T) {
	t.Parallel()
	in, _ := newInbox(t, consume.GapWait)
	m := ordered("k2", 2)
	m.Closed, m.Payload = target.ClosedPurged, []byte(target.ClosedBody)
	_, err := in.TransactItems(m)
	require.Error(t, err, "a marker has no effect: TransactItems should refuse it, as Close refuses a row")
}

// Hypotheses that held (regressions).

// Two copies of a marker: the second is a duplicate, the cursor moved once.
func TestRev_DuplicateMarkersCloseThePlaceOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	in, table := newInbox(t, consume.GapWait)
	require.NoError(t, in.Apply(ctx, ordered("k1", 1), credit(t, table, "a", "k1", 1)))
	mk := ordered("k2", 2)
	mk.Closed = target.ClosedPurged
	require.NoError(t, in.Close(ctx, mk))
	require.ErrorIs(t, in.Close(ctx, mk), consume.ErrDuplicate)
	require.NoError(t, in.Apply(ctx, ordered("k3", 3), credit(t, table, "a", "k3", 1)))
	// Premise changed: the row of the closed place, should it come (a
	// redrive after its place was closed), is late, not a duplicate: the
	// closing message has an inbox item of its own, so the Late policy
	// decides (issue 38: a row its group went past goes to the late
	// rule). Under LateRecord, the default, it is recorded and applies
	// nothing.
	require.ErrorIs(t, in.Apply(ctx, ordered("k2", 2), credit(t, table, "a", "k2", 1)), consume.ErrLate)
	_, history := account(t, table, "a")
	require.Equal(t, []string{"k1", "k3"}, history)
}

// A marker after its place's row was applied (an earlier copy landed) is
// a duplicate; a marker before its turn waits (GapWait) or passes (GapPass).
func TestRev_MarkerAfterItsRowAndBeforeItsTurn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, gaps := range []consume.GapPolicy{consume.GapWait, consume.GapPass} {
		in, table := newInbox(t, gaps)
		require.NoError(t, in.Apply(ctx, ordered("k1", 1), credit(t, table, "a", "k1", 1)))
		mk := ordered("k1", 1)
		mk.Closed = target.ClosedPurged
		require.ErrorIs(t, in.Close(ctx, mk), consume.ErrDuplicate)
		early := ordered("k3", 3)
		early.Closed = target.ClosedPurged
		err := in.Close(ctx, early)
		if gaps == consume.GapWait {
			require.ErrorIs(t, err, consume.ErrGap)
			continue
		}
		require.NoError(t, err)
		require.ErrorIs(t, in.Apply(ctx, ordered("k2", 2), credit(t, table, "a", "k2", 1)), consume.ErrLate)
		_, history := account(t, table, "a")
		require.Equal(t, []string{"k1"}, history)
	}
}

// A hostile outflow.closed on a row of a standard queue still decodes as a
// marker, but Outflow's producer refuses the prefix (see the root
// package's regression). LateApply never applies a marker's effect.
func TestRev_LateMarkerUnderLateApplyHasNoEffect(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	table := newTable(t)
	in, err := consume.NewInbox(awstest.DynamoDB(t), consume.InboxConfig{Table: table, Consumer: "ledger", Gaps: consume.GapPass, Late: consume.LateApply})
	require.NoError(t, err)
	require.NoError(t, in.Apply(ctx, ordered("k1", 1), credit(t, table, "a", "k1", 1)))
	require.NoError(t, in.Apply(ctx, ordered("k3", 3), credit(t, table, "a", "k3", 1)))
	mk := ordered("k2", 2)
	mk.Closed = target.ClosedPurged
	require.ErrorIs(t, in.Apply(ctx, mk, credit(t, table, "a", "k2", 1)), consume.ErrLate)
	_, history := account(t, table, "a")
	require.Equal(t, []string{"k1", "k3"}, history)
}

// A Handler batch on a FIFO queue whose marker is refused (before its
// turn) reports it and the rest of its group failed, and applies nothing
// of the group past it.
func TestRev_HandlerMarkerFailingMidGroupHoldsTheRestOfItsGroup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	in, table := newInbox(t, consume.GapWait)
	h := consume.Handler{
		Apply: func(ctx context.Context, m consume.Message) error {
			return in.Apply(ctx, m, credit(t, table, "a", m.Key, 1))
		},
		Closed: in.Close,
	}
	resp, err := h.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{
		fifoRecord("k1", 1, ""), fifoRecord("k3", 3, target.ClosedPurged), fifoRecord("k4", 4, ""),
	}})
	require.NoError(t, err)
	require.Equal(t, []string{"id-k3", "id-k4"}, failedIDs(resp))
	_, history := account(t, table, "a")
	require.Equal(t, []string{"k1"}, history)
}
