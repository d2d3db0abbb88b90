package consume_test

// Adopted from the adversarial review of issue 38 (review38): two seams of
// the consumer's half that failed, now fixed.

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/consume"
	"github.com/outflowhq/outflow/internal/awstest"
)

// Under skip, row r (place 2) is dead-lettered and its place closed; the
// operator redrives it, and it arrives after its group went on: LateRecord
// (the default) records it and applies nothing. Later the key is staged
// again at the group's tail (a producer's retry past the done row's
// retention) and arrives in its turn, place 4. The review found place 4
// closed as restaged, the late record read as "applied at place 2": r's
// effect was applied at no place. A late record is not an application:
// the key is applied at place 4, its record replaced, once.
func TestInbox_AKeyRecordedLateIsAppliedWhenItComesAgainInItsTurn(t *testing.T) {
	t.Parallel()
	in, table := newInbox(t, consume.GapWait)
	ctx := context.Background()
	apply := func(m consume.Message) error { return in.Apply(ctx, m, credit(t, table, "a", m.Key, 1)) }

	require.NoError(t, apply(ordered("k1", 1)))
	closed := ordered("r", 2)
	closed.Closed = "dead-letter"
	require.NoError(t, in.Close(ctx, closed), "place 2 closed: r was dead-lettered under skip")
	require.NoError(t, apply(ordered("k3", 3)))
	err := apply(ordered("r", 2)) // r redriven, late
	require.ErrorIs(t, err, consume.ErrLate, "recorded late, not applied")
	record := reviewGet(t, table, "inbox ledger r")
	require.Equal(t, &types.AttributeValueMemberBOOL{Value: false}, record["applied"], "the record says it stands for no effect")
	err = apply(ordered("r", 2)) // a copy of the redriven r
	require.ErrorIs(t, err, consume.ErrDuplicate, "a copy of a late message is a duplicate")
	require.NotContains(t, err.Error(), "already applied", "but it was never applied, and its error says so: %v", err)
	_, history := account(t, table, "a")
	require.Equal(t, []string{"k1", "k3"}, history, "r not applied yet")

	// The key staged again arrives in its turn, at place 4.
	require.NoError(t, apply(ordered("r", 4)), "r's first arrival in its turn is applied: it was never applied before")
	err = apply(ordered("r", 4))
	require.ErrorIs(t, err, consume.ErrDuplicate, "a copy of place 4")
	err = apply(ordered("r", 2))
	require.ErrorIs(t, err, consume.ErrDuplicate, "r redriven again: its key was applied at place 4 since")
	require.ErrorContains(t, err, "its key was applied at place 4, and its group went past this place")
	require.NoError(t, apply(ordered("k5", 5)), "the group went on past place 4")
	balance, history := account(t, table, "a")
	require.Equal(t, []string{"k1", "k3", "r", "k5"}, history)
	require.Equal(t, 4, balance)

	item := reviewGet(t, table, "inbox ledger r")
	require.Equal(t, "4", item["seq"].(*types.AttributeValueMemberN).Value, "the late record replaced by the applied one")
	require.NotContains(t, item, "late_after")
	require.NotContains(t, item, "applied")
}

// Copies of the key staged again, racing each other over its late record:
// the conditional replacement and the cursor let one of them apply it.
func TestInbox_CopiesRacingOverALateRecordApplyTheKeyOnce(t *testing.T) {
	t.Parallel()
	in, table := newInbox(t, consume.GapPass)
	ctx := context.Background()
	apply := func(m consume.Message) error { return in.Apply(ctx, m, credit(t, table, "a", m.Key, 1)) }
	require.NoError(t, apply(ordered("k1", 1)))
	require.NoError(t, apply(ordered("k3", 3)), "place 2 passed")
	require.ErrorIs(t, apply(ordered("r", 2)), consume.ErrLate)

	const copies = 4
	var wg sync.WaitGroup
	errs := make([]error, copies)
	for i := range copies {
		wg.Go(func() {
			for range 20 { // a transaction conflict is retried, as a redelivery would
				if errs[i] = apply(ordered("r", 4)); errs[i] == nil || errors.Is(errs[i], consume.ErrDuplicate) {
					return
				}
			}
		})
	}
	wg.Wait()
	applied := 0
	for _, err := range errs {
		if err == nil {
			applied++
			continue
		}
		require.ErrorIs(t, err, consume.ErrDuplicate)
	}
	require.Equal(t, 1, applied)
	balance, history := account(t, table, "a")
	require.Equal(t, []string{"k1", "k3", "r"}, history)
	require.Equal(t, 3, balance)
}

// A consumer that starts on a group part-way through (a queue subscribed
// to an ordered route's topic after its groups began, a queue recreated,
// one whose retention dropped messages) first receives place 4: places
// 1-3 were delivered before it and never come. By default it waits for
// place 1, for ever (the review's finding); with JoinWhereSeen it starts
// the group at place 4 and applies it in order from there.
func TestInbox_JoinWhereSeenStartsAGroupAtTheFirstPlaceThatArrives(t *testing.T) {
	t.Parallel()
	waiting, table := newInbox(t, consume.GapWait)
	ctx := context.Background()
	applyWith := func(in *consume.Inbox, m consume.Message) error {
		return in.Apply(ctx, m, credit(t, table, "a", m.Key, 1))
	}
	for range 10 { // each receive until the consumer's redrive policy takes it
		require.ErrorIs(t, applyWith(waiting, ordered("k4", 4)), consume.ErrGap, "by default a group starts at place 1")
	}
	_, history := account(t, table, "a")
	require.Empty(t, history)

	in, err := consume.NewInbox(awstest.DynamoDB(t), consume.InboxConfig{Table: table, Consumer: "ledger", Join: consume.JoinWhereSeen})
	require.NoError(t, err)
	apply := func(m consume.Message) error { return applyWith(in, m) }
	require.NoError(t, apply(ordered("k4", 4)), "the group starts where it is first seen")
	require.ErrorIs(t, apply(ordered("k4", 4)), consume.ErrDuplicate)
	require.ErrorIs(t, apply(ordered("k6", 6)), consume.ErrGap, "past its first place the group waits at gaps")
	require.NoError(t, apply(ordered("k5", 5)))
	require.NoError(t, apply(ordered("k6", 6)))

	// A place before the one joined at, should it come after all, was
	// passed, not applied: late, not a duplicate.
	require.ErrorIs(t, apply(ordered("k2", 2)), consume.ErrLate)
	closing := ordered("k3", 3)
	closing.Closed = "purged"
	require.ErrorIs(t, in.Close(ctx, closing), consume.ErrLate)

	// A group it has a cursor for is not joined again: h starts at 1.
	h := func(key string, seq int64) consume.Message { m := ordered(key, seq); m.Group = "h"; return m }
	require.NoError(t, apply(h("h1", 1)))
	require.ErrorIs(t, apply(h("h3", 3)), consume.ErrGap)

	_, history = account(t, table, "a")
	require.Equal(t, []string{"k4", "k5", "k6", "h1"}, history)
	cursor := reviewGet(t, table, "cursor ledger g")
	require.Equal(t, "4", cursor["joined"].(*types.AttributeValueMemberN).Value, "the cursor says where the group was joined")
	require.Equal(t, "3", cursor["skipped"].(*types.AttributeValueMemberN).Value)
	first := reviewGet(t, table, "inbox ledger k4")
	require.Equal(t, "1", first["gap_from"].(*types.AttributeValueMemberN).Value, "the first message's item records the places passed")
	require.Equal(t, "3", first["gap_to"].(*types.AttributeValueMemberN).Value)
	require.NotContains(t, reviewGet(t, table, "cursor ledger h"), "joined")
}

// A consumer that runs its own transactions records a late message with
// TransactItemsRecordLate; the key, staged again, is applied in its turn
// by TransactItems's put, which replaces the record.
func TestInbox_TransactItemsApplyAKeyRecordedLateByTransactItemsRecordLate(t *testing.T) {
	t.Parallel()
	full, table := newInbox(t, consume.GapPass)
	ctx := context.Background()
	require.NoError(t, full.Apply(ctx, ordered("k1", 1), credit(t, table, "a", "k1", 1)))
	require.NoError(t, full.Apply(ctx, ordered("k3", 3), credit(t, table, "a", "k3", 1)))
	own, err := consume.NewInbox(nil, consume.InboxConfig{Table: table, Consumer: "ledger", Gaps: consume.GapPass})
	require.NoError(t, err)
	api := awstest.DynamoDB(t)
	run := func(m consume.Message, items []types.TransactWriteItem) error {
		_, err := api.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		return own.Classify(ctx, m, items, err)
	}

	late := ordered("r", 2)
	items, err := own.TransactItems(late)
	require.NoError(t, err)
	err = run(late, append(items, credit(t, table, "a", "r", 1)))
	var passed *consume.OrderError
	require.ErrorAs(t, err, &passed)
	require.ErrorIs(t, err, consume.ErrPassed)
	items, err = own.TransactItemsRecordLate(late, passed)
	require.NoError(t, err)
	require.NoError(t, run(late, items), "recorded, no effect")

	again := ordered("r", 4)
	items, err = own.TransactItems(again)
	require.NoError(t, err)
	require.NoError(t, run(again, append(items, credit(t, table, "a", "r", 1))))
	items, err = own.TransactItems(again)
	require.NoError(t, err)
	require.ErrorIs(t, run(again, append(items, credit(t, table, "a", "r", 1))), consume.ErrDuplicate)
	_, history := account(t, table, "a")
	require.Equal(t, []string{"k1", "k3", "r"}, history)
}
