package consume_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/consume"
	"github.com/outflowhq/outflow/internal/awstest"
)

// newTable makes a table with CreateTable, deleted after the test.
func newTable(t *testing.T) string {
	t.Helper()
	api := awstest.DynamoDB(t)
	table := awstest.UniqueName("consume-test")
	require.NoError(t, consume.CreateTable(context.Background(), api, table))
	t.Cleanup(func() {
		_, _ = api.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	return table
}

// newInbox makes a fresh table and an inbox on it.
func newInbox(t *testing.T, gaps consume.GapPolicy) (*consume.Inbox, string) {
	t.Helper()
	table := newTable(t)
	in, err := consume.NewInbox(awstest.DynamoDB(t), consume.InboxConfig{Table: table, Consumer: "ledger", Gaps: gaps})
	require.NoError(t, err)
	return in, table
}

// credit is the effect the tests apply: add amount to an account's
// balance and append the message's key to the account's history, on the
// condition that the account is not frozen.
func credit(t *testing.T, table, account, key string, amount int) types.TransactWriteItem {
	t.Helper()
	upd := expression.Add(expression.Name("balance"), expression.Value(amount)).
		Set(expression.Name("history"), expression.ListAppend(
			expression.IfNotExists(expression.Name("history"), expression.Value([]string{})), expression.Value([]string{key})))
	cond := expression.AttributeNotExists(expression.Name("frozen"))
	expr, err := expression.NewBuilder().WithUpdate(upd).WithCondition(cond).Build()
	require.NoError(t, err)
	return types.TransactWriteItem{Update: &types.Update{
		TableName: aws.String(table), Key: map[string]types.AttributeValue{consume.AttrPK: &types.AttributeValueMemberS{Value: "account " + account}},
		UpdateExpression: expr.Update(), ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	}}
}

// account reads an account's balance and history.
func account(t *testing.T, table, name string) (int, []string) {
	t.Helper()
	out, err := awstest.DynamoDB(t).GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(table),
		Key: map[string]types.AttributeValue{consume.AttrPK: &types.AttributeValueMemberS{Value: "account " + name}}, ConsistentRead: aws.Bool(true)})
	require.NoError(t, err)
	if out.Item == nil {
		return 0, nil
	}
	balance, err := strconv.Atoi(out.Item["balance"].(*types.AttributeValueMemberN).Value)
	require.NoError(t, err)
	var history []string
	for _, v := range out.Item["history"].(*types.AttributeValueMemberL).Value {
		history = append(history, v.(*types.AttributeValueMemberS).Value)
	}
	return balance, history
}

func ordered(key string, seq int64) consume.Message {
	return consume.Message{Key: key, Group: "g", Seq: seq, Attempt: 1}
}

func TestInbox_AppliesAMessageOnceHoweverOftenItArrives(t *testing.T) {
	t.Parallel()
	in, table := newInbox(t, consume.GapWait)
	ctx := context.Background()
	m := consume.Message{Key: "k1", Attempt: 1}
	require.NoError(t, in.Apply(ctx, m, credit(t, table, "a", m.Key, 5)))
	for range 3 {
		require.ErrorIs(t, in.Apply(ctx, m, credit(t, table, "a", m.Key, 5)), consume.ErrDuplicate)
	}
	balance, history := account(t, table, "a")
	require.Equal(t, 5, balance)
	require.Equal(t, []string{"k1"}, history)

	// Another consumer of the same message applies it once too.
	other, err := consume.NewInbox(awstest.DynamoDB(t), consume.InboxConfig{Table: table, Consumer: "audit"})
	require.NoError(t, err)
	require.NoError(t, other.Apply(ctx, m, credit(t, table, "b", m.Key, 5)))
	require.ErrorIs(t, other.Apply(ctx, m, credit(t, table, "b", m.Key, 5)), consume.ErrDuplicate)
}

// The effect's own refusal is the consumer's: it is returned as it is, and
// nothing of the inbox is written, so the message applies once the effect
// can.
func TestInbox_AnEffectsRefusalLeavesTheMessageUnapplied(t *testing.T) {
	t.Parallel()
	in, table := newInbox(t, consume.GapWait)
	ctx := context.Background()
	api := awstest.DynamoDB(t)
	key := map[string]types.AttributeValue{consume.AttrPK: &types.AttributeValueMemberS{Value: "account a"}}
	_, err := api.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
		consume.AttrPK: key[consume.AttrPK], "frozen": &types.AttributeValueMemberBOOL{Value: true}}})
	require.NoError(t, err)
	m := ordered("k1", 1)
	err = in.Apply(ctx, m, credit(t, table, "a", m.Key, 5))
	var canceled *types.TransactionCanceledException
	require.ErrorAs(t, err, &canceled)
	require.NotErrorIs(t, err, consume.ErrDuplicate)

	_, err = api.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key, UpdateExpression: aws.String("REMOVE frozen")})
	require.NoError(t, err)
	require.NoError(t, in.Apply(ctx, m, credit(t, table, "a", m.Key, 5)))
	balance, _ := account(t, table, "a")
	require.Equal(t, 5, balance)
}

func TestInbox_AppliesAnOrderedGroupOnlyInOrder(t *testing.T) {
	t.Parallel()
	in, table := newInbox(t, consume.GapWait)
	ctx := context.Background()
	apply := func(m consume.Message) error { return in.Apply(ctx, m, credit(t, table, "a", m.Key, 1)) }

	err := apply(ordered("k2", 2))
	var oe *consume.OrderError
	require.ErrorAs(t, err, &oe)
	require.ErrorIs(t, err, consume.ErrGap)
	require.Equal(t, consume.OrderError{Key: "k2", Group: "g", Place: 2, Cursor: 0}, *oe)

	require.NoError(t, apply(ordered("k1", 1)))
	require.ErrorIs(t, apply(ordered("k1", 1)), consume.ErrDuplicate)
	require.ErrorIs(t, apply(ordered("k3", 3)), consume.ErrGap)
	require.NoError(t, apply(ordered("k2", 2)))
	require.NoError(t, apply(ordered("k3", 3)))
	require.ErrorIs(t, apply(ordered("k3", 3)), consume.ErrDuplicate)

	// Another group keeps its own place.
	require.NoError(t, in.Apply(ctx, consume.Message{Key: "h1", Group: "h", Seq: 1, Attempt: 1}, credit(t, table, "a", "h1", 1)))

	_, history := account(t, table, "a")
	require.Equal(t, []string{"k1", "k2", "k3", "h1"}, history)
}

// Under GapPass a gap is passed, and recorded on the inbox item of the
// message after it; the missing place, if it comes after all, is told
// apart from a duplicate: its group passed it.
func TestInbox_PassesAGapAndTellsALateArrivalFromADuplicate(t *testing.T) {
	t.Parallel()
	in, table := newInbox(t, consume.GapPass)
	ctx := context.Background()
	apply := func(m consume.Message) error { return in.Apply(ctx, m, credit(t, table, "a", m.Key, 1)) }
	require.NoError(t, apply(ordered("k1", 1)))
	require.NoError(t, apply(ordered("k4", 4)), "places 2 and 3 were dead-lettered")
	require.ErrorIs(t, apply(ordered("k4", 4)), consume.ErrDuplicate)
	err := apply(ordered("k2", 2))
	require.ErrorIs(t, err, consume.ErrPassed)
	var oe *consume.OrderError
	require.ErrorAs(t, err, &oe)
	require.EqualValues(t, 4, oe.Cursor)
	require.NoError(t, apply(ordered("k5", 5)))

	_, history := account(t, table, "a")
	require.Equal(t, []string{"k1", "k4", "k5"}, history)
	out, err := awstest.DynamoDB(t).GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table),
		Key: map[string]types.AttributeValue{consume.AttrPK: &types.AttributeValueMemberS{Value: "inbox ledger k4"}}, ConsistentRead: aws.Bool(true)})
	require.NoError(t, err)
	require.Equal(t, "2", out.Item["gap_from"].(*types.AttributeValueMemberN).Value)
	require.Equal(t, "3", out.Item["gap_to"].(*types.AttributeValueMemberN).Value)
}

// Several workers given every message of a group, each in its own
// shuffled order, each retrying what is not yet its turn: every effect is
// applied once, in the group's order.
func TestInbox_ConcurrentWorkersApplyEachMessageOnceInOrder(t *testing.T) {
	t.Parallel()
	in, table := newInbox(t, consume.GapWait)
	ctx := context.Background()
	const n, workers = 12, 3
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		pending := rand.New(rand.NewPCG(uint64(w), 0)).Perm(n)
		wg.Go(func() {
			for round := 0; len(pending) > 0; round++ {
				if round == 1000 {
					errs <- errors.New("messages never got their turn")
					return
				}
				var later []int
				for _, i := range pending {
					m := ordered("k"+strconv.Itoa(i+1), int64(i+1))
					err := in.Apply(ctx, m, credit(t, table, "a", m.Key, i+1))
					var canceled *types.TransactionCanceledException
					switch {
					case err == nil, errors.Is(err, consume.ErrDuplicate):
					case errors.Is(err, consume.ErrGap), errors.As(err, &canceled):
						later = append(later, i) // not its turn yet, or a conflict with another worker
					default:
						errs <- err
						return
					}
				}
				pending = later
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	balance, history := account(t, table, "a")
	require.Equal(t, n*(n+1)/2, balance)
	want := make([]string, n)
	for i := range want {
		want[i] = "k" + strconv.Itoa(i+1)
	}
	require.Equal(t, want, history)
}

func TestInbox_RefusesAnOrderedMessageWithoutItsGroup(t *testing.T) {
	t.Parallel()
	in, err := consume.NewInbox(nil, consume.InboxConfig{Table: "t", Consumer: "c"})
	require.NoError(t, err)
	_, err = in.TransactItems(consume.Message{Key: "k", Seq: 3, Attempt: 1})
	require.ErrorIs(t, err, consume.ErrNoGroup)
	items, err := in.TransactItems(consume.Message{Key: "k", Attempt: 1})
	require.NoError(t, err)
	require.Len(t, items, 1, "an unordered message adds its inbox item alone")
	_, err = consume.NewInbox(nil, consume.InboxConfig{Table: "t", Consumer: "a b"})
	require.Error(t, err)
}

// CreateTable may run at each start: a table that can hold the items is
// left as it is; one with another key is refused, named.
func TestCreateTable_LeavesASuitableTableAndRefusesAnotherKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	api := awstest.DynamoDB(t)
	table := newTable(t)
	require.NoError(t, consume.CreateTable(ctx, api, table), "the table exists already, with the inbox's key")

	other := awstest.UniqueName("consume-other-key")
	_, err := api.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(other),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = api.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(other)})
	})
	err = consume.CreateTable(ctx, api, other)
	require.ErrorContains(t, err, "cannot hold inbox items")
	require.ErrorContains(t, err, other)
}
