package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/outflowhq/outflow/consume"
	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/faults"
	"github.com/outflowhq/outflow/internal/outbox"
)

// The consumer's faults, drawn from its own plan.
const (
	killBeforeEffect faults.Kind = "consumer: killed before the effect"
	killAfterEffect  faults.Kind = "consumer: killed between effect and delete"
	deleteFails      faults.Kind = "consumer: delete entry fails"
)

// errKilled is what a killed consumer's calls return: nothing it does
// after its kill reaches SQS or DynamoDB.
var errKilled = errors.New("consumer killed")

// process is one life of a consumer: its SQS client dies with it. A kill
// cancels the poller's context and refuses every later call, so the
// poller neither deletes what it applied nor releases what it held: the
// messages come back when their visibility timeout lapses, as they do
// after a real crash.
type process struct {
	next  consume.PollAPI
	plan  *faults.Plan
	dead  atomic.Bool
	stop  context.CancelFunc
	stats *consumerStats
	// fair, on a standard queue, gives a message's key the group id a
	// fair queue (or a FIFO topic into a standard queue) would carry:
	// SQS hands the consumer a MessageGroupId that means no order.
	fair func(key string) string
}

func (p *process) kill() { p.dead.Store(true); p.stop() }

// ReceiveMessage implements consume.PollAPI.
func (p *process) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	if p.dead.Load() {
		return nil, errKilled
	}
	out, err := p.next.ReceiveMessage(ctx, in, opts...)
	if err != nil || p.fair == nil {
		return out, err
	}
	for i, m := range out.Messages {
		key := m.MessageAttributes[delivery.AttrKey]
		if g := p.fair(aws.ToString(key.StringValue)); g != "" {
			if m.Attributes == nil {
				out.Messages[i].Attributes = map[string]string{}
			}
			out.Messages[i].Attributes[string(sqstypes.MessageSystemAttributeNameMessageGroupId)] = g
		}
	}
	return out, nil
}

// DeleteMessageBatch implements consume.PollAPI; entries fail by the
// plan, and SQS delivers each again.
func (p *process) DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	if p.dead.Load() {
		return nil, errKilled
	}
	var pass []sqstypes.DeleteMessageBatchRequestEntry
	var failed []sqstypes.BatchResultErrorEntry
	for _, e := range in.Entries {
		if p.plan.Hit(deleteFails, aws.ToString(e.ReceiptHandle)) {
			p.stats.deletesFailed.Add(1)
			failed = append(failed, sqstypes.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InternalError"), Message: aws.String(string(deleteFails))})
			continue
		}
		pass = append(pass, e)
	}
	out := &sqs.DeleteMessageBatchOutput{}
	if len(pass) > 0 {
		next := *in
		next.Entries = pass
		res, err := p.next.DeleteMessageBatch(ctx, &next, opts...)
		if err != nil {
			return nil, err
		}
		out = res
	}
	out.Failed = append(out.Failed, failed...)
	return out, nil
}

// ChangeMessageVisibilityBatch implements consume.PollAPI.
func (p *process) ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, opts ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	if p.dead.Load() {
		return nil, errKilled
	}
	return p.next.ChangeMessageVisibilityBatch(ctx, in, opts...)
}

// consumerStats counts what the consumers did.
type consumerStats struct {
	applies, committed, duplicates, retried  atomic.Int64
	killedBefore, killedAfter, deletesFailed atomic.Int64
	lives                                    atomic.Int64
}

// gap is a run of places an ordered group's consumer passed.
type gap struct {
	group    string
	from, to int64
}

// ledger is the consumer's side: it applies each transfer to the
// account's ledger item, and each ordered transfer to its group's log
// too, in one transaction with its inbox items.
type ledger struct {
	db    *dynamodb.Client
	table string
	plan  *faults.Plan
	stats *consumerStats
	// want holds what was staged, by key, for the consumer to check a
	// message against.
	want map[string]transfer

	mu       sync.Mutex
	attempts map[string]int
	gaps     []gap
	// closed holds the places closed by Outflow's message, by group;
	// lateClosed counts closing messages of places already applied (the
	// row arrived, its success hidden by a fault, before it was closed).
	closed     map[string][]int64
	lateClosed int
	// redriven holds the keys the operator redrove (under skip, so their
	// places may have been passed); late those of them the consumer
	// recorded late, not applied, for their group had gone past them.
	redriven map[string]bool
	late     map[string]bool
	passed   []string // copies refused as ErrPassed (behind their group), and why
	problems []string
	// passedKeys are the keys of passed, and appliedAt when each key's
	// effect committed (from start): a failure's diagnosis.
	passedKeys []string
	appliedAt  map[string]time.Duration
	start      time.Time
}

// payload is a transfer as its row carries it.
type payload struct {
	Account string `json:"account"`
	Amount  int64  `json:"amount"`
}

// lateKeys is a copy of the keys recorded late.
func (l *ledger) lateKeys() map[string]bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.late)
}

func (l *ledger) problem(format string, args ...any) {
	l.mu.Lock()
	l.problems = append(l.problems, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

// effect is the consumer's own write for a transfer: the account's
// ledger moves by the amount, counts one more transfer and names it; an
// ordered transfer is appended to its group's log.
func (l *ledger) effect(m consume.Message, p payload) []types.TransactWriteItem {
	items := []types.TransactWriteItem{{Update: &types.Update{
		TableName:        aws.String(l.table),
		Key:              pk("ledger " + p.Account),
		UpdateExpression: aws.String("ADD #total :a, #applied :one, #keys :k"),
		ExpressionAttributeNames: map[string]string{
			"#total": "total", "#applied": "applied", "#keys": "keys",
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":a":   &types.AttributeValueMemberN{Value: strconv.FormatInt(p.Amount, 10)},
			":one": &types.AttributeValueMemberN{Value: "1"},
			":k":   &types.AttributeValueMemberSS{Value: []string{m.Key}},
		},
	}}}
	if m.Ordered() {
		items = append(items, types.TransactWriteItem{Update: &types.Update{
			TableName:                aws.String(l.table),
			Key:                      pk("order " + m.Group),
			UpdateExpression:         aws.String("SET #log = list_append(if_not_exists(#log, :empty), :k)"),
			ExpressionAttributeNames: map[string]string{"#log": "log"},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":empty": &types.AttributeValueMemberL{},
				":k":     &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{Value: m.Key}}},
			},
		}})
	}
	return items
}

// run writes the effect and the inbox's items in one transaction and
// classifies the outcome.
func (l *ledger) run(ctx context.Context, in *consume.Inbox, m consume.Message, effect, items []types.TransactWriteItem) error {
	tx := append(append([]types.TransactWriteItem{}, effect...), items...)
	_, err := l.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: tx})
	return in.Classify(ctx, m, tx, err)
}

// apply is the consumer's Apply for one process: the inbox's strong mode,
// with a gap in an ordered group passed (the route skips its dead heads)
// and a copy behind its group refused. The process may be killed before
// the effect, or after it and before the delete.
func (l *ledger) apply(ctx context.Context, proc *process, in *consume.Inbox, m consume.Message) error {
	if proc.dead.Load() {
		return errKilled
	}
	l.stats.applies.Add(1)
	l.mu.Lock()
	l.attempts[m.Key]++
	n := l.attempts[m.Key]
	l.mu.Unlock()
	if l.plan.Hit(killBeforeEffect, m.Key, n) {
		l.stats.killedBefore.Add(1)
		proc.kill()
		return errKilled
	}
	tr, ok := l.want[m.Key]
	var p payload
	switch {
	case !ok:
		l.problem("received %s, which was never staged", m.Key)
		return fmt.Errorf("unknown key %s", m.Key)
	case json.Unmarshal(m.Payload, &p) != nil || p.Account != tr.account || p.Amount != tr.amount:
		l.problem("%s arrived as %q, staged as %s %d", m.Key, m.Payload, tr.account, tr.amount)
		return fmt.Errorf("%s: payload differs", m.Key)
	case m.Seq != tr.place || m.Group != tr.group:
		l.problem("%s arrived as place %d of group %q, staged as %d of %q", m.Key, m.Seq, m.Group, tr.place, tr.group)
		return fmt.Errorf("%s: place differs", m.Key)
	}
	effect := l.effect(m, p)
	items, err := in.TransactItems(m)
	if err != nil {
		return err
	}
	err = l.run(ctx, in, m, effect, items)
	var order *consume.OrderError
	if errors.As(err, &order) {
		l.mu.Lock()
		redriven := l.redriven[m.Key]
		l.mu.Unlock()
		if !order.Gap() && redriven {
			// A dead letter redriven after its group went past it: recorded
			// late, applied never (the inbox's default, LateRecord).
			if items, err = in.TransactItemsLate(m, order); err != nil {
				return err
			}
			if err = l.run(ctx, in, m, nil, items); err != nil && !errors.Is(err, consume.ErrDuplicate) {
				l.stats.retried.Add(1)
				return err
			}
			l.mu.Lock()
			l.late[m.Key] = true
			l.mu.Unlock()
			return nil
		}
		if !order.Gap() {
			// Its group applied a later place: a reordering, or a copy
			// sent after the group passed it. Neither may happen here.
			l.mu.Lock()
			l.passed = append(l.passed, fmt.Sprintf("%v (message %s, attempt %d, receive %d)", err, m.MessageID, m.Attempt, n))
			l.passedKeys = append(l.passedKeys, m.Key)
			l.mu.Unlock()
			return err
		}
		if items, err = in.TransactItemsPast(m, order); err != nil {
			return err
		}
		if err = l.run(ctx, in, m, effect, items); err == nil {
			l.mu.Lock()
			l.gaps = append(l.gaps, gap{group: m.Group, from: order.Cursor + 1, to: order.Place - 1})
			l.mu.Unlock()
		}
	}
	switch {
	case err == nil:
		l.stats.committed.Add(1)
		l.mu.Lock()
		l.appliedAt[m.Key] = time.Since(l.start)
		l.mu.Unlock()
	case errors.Is(err, consume.ErrDuplicate):
		l.stats.duplicates.Add(1)
		return err
	default:
		l.stats.retried.Add(1)
		return err
	}
	if l.plan.Hit(killAfterEffect, m.Key, n) {
		// The effect committed; the delete never goes.
		l.stats.killedAfter.Add(1)
		proc.kill()
	}
	return nil
}

func pk(v string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{consume.AttrPK: &types.AttributeValueMemberS{Value: v}}
}

// close is the consumer's Closed for one process: a message closing the
// place of a row that will not come moves the group's cursor past it,
// with no effect (Inbox.Close); a gap before it is passed, as apply
// passes one before a row.
func (l *ledger) close(ctx context.Context, proc *process, in *consume.Inbox, m consume.Message) error {
	if proc.dead.Load() {
		return errKilled
	}
	l.stats.applies.Add(1)
	tr, ok := l.want[m.Key]
	switch {
	case !ok:
		l.problem("received a closing message for %s, which was never staged", m.Key)
		return fmt.Errorf("unknown key %s", m.Key)
	case m.Seq != tr.place || m.Group != tr.group || m.Seq == 0:
		l.problem("%s's place closed as place %d of group %q, staged as %d of %q", m.Key, m.Seq, m.Group, tr.place, tr.group)
		return fmt.Errorf("%s: place differs", m.Key)
	case m.Closed != outbox.ClosedDeadLetter && m.Closed != outbox.ClosedPurged:
		l.problem("%s's place closed for %q", m.Key, m.Closed)
		return fmt.Errorf("%s: unknown reason", m.Key)
	}
	err := in.Close(ctx, m)
	var order *consume.OrderError
	if errors.As(err, &order) && order.Gap() {
		items, ierr := in.TransactItemsPast(m, order)
		if ierr != nil {
			return ierr
		}
		if err = l.run(ctx, in, m, nil, items); err == nil {
			l.mu.Lock()
			l.gaps = append(l.gaps, gap{group: m.Group, from: order.Cursor + 1, to: order.Place - 1})
			l.mu.Unlock()
		}
	}
	switch {
	case err == nil:
		l.mu.Lock()
		l.closed[m.Group] = append(l.closed[m.Group], m.Seq)
		l.mu.Unlock()
		return nil
	case errors.Is(err, consume.ErrLate):
		l.mu.Lock()
		l.lateClosed++
		l.mu.Unlock()
		return err
	case errors.Is(err, consume.ErrDuplicate):
		l.stats.duplicates.Add(1)
		return err
	default:
		l.stats.retried.Add(1)
		return err
	}
}
