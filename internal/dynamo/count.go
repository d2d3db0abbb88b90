package dynamo

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// DefaultCountCap is how many index entries Count counts at most in each
// shard's bucket (due, not yet due) and each dead queue, unless told
// otherwise. A query reads at most 1 MB of index a request, some thousands
// of entries, so counting this many costs a few requests a bucket.
const DefaultCountCap = 10_000

// DeadQueueNone is the dead-index partition of dead letters whose queue
// name cannot be an index key (empty, or too long).
const DeadQueueNone = "(none)"

// Dead-letter counting, as Stats.DeadCounted reports it.
const (
	// DeadCountedQueues: one count query per named dead queue.
	DeadCountedQueues = "queues"
	// DeadCountedScan: a scan of the dead index, capped, tallied by queue.
	DeadCountedScan = "scan"
	// DeadCountedAll: every dead letter read (Operator.Stats).
	DeadCountedAll = "all"
)

// CountQuery is what Count counts.
type CountQuery struct {
	// DeadQueues are the dead-index partitions to count, one count query
	// each: the dispatcher's routes and DeadQueueNone. Dead letters of a
	// queue not named (a queue with no route) are not counted. None: the
	// dead index is scanned instead, up to Cap entries, and tallied by
	// queue.
	DeadQueues []string
	// Cap bounds what is counted: at most Cap entries in each shard's
	// bucket and each dead queue (or the dead-index scan). A count that
	// reaches it is reported as Cap with AtLeast set, a lower bound, so
	// the requests made do not grow with the backlog. 0: no bound, every
	// count pages to the end of the index.
	Cap int
}

// Count counts the backlog with count queries only, so that at any
// backlog it costs a bounded number of requests (with a cap): per shard,
// the due index's entries due now (due_at ≤ now) and not yet due, each a
// count query, and the oldest due entry (one query, Limit 1); per dead
// queue, a count query of the dead index; and one read of the audit item.
// No row is read.
//
// What that cannot tell: a claim leaves the index alone, so a shard's Due
// counts its claimed rows too and Claimed is 0; the due index is keyed by
// shard, not queue, so Queues hold dead letters only; blocked groups are
// not counted. Operator.Stats reads rows for all of that.
func (o *Operator) Count(ctx context.Context, now time.Time, q CountQuery) (*Stats, error) {
	st := &Stats{Queues: map[string]*Counts{}, Shards: map[string]*Counts{}, Cap: q.Cap, DeadCounted: DeadCountedQueues}
	stray, err := o.Audited(ctx)
	if err != nil {
		return nil, err
	}
	st.Stray = stray
	nowMs := now.UnixMilli()
	for shard := range o.cfg.Shards {
		sk := strconv.Itoa(shard)
		shardKey := expression.Key(AttrShard).Equal(expression.Value(sk))
		due, dueMore, err := o.countQuery(ctx, DueIndex, shardKey.And(expression.Key(AttrDueAt).LessThanEqual(expression.Value(nowMs))), q.Cap)
		if err != nil {
			return nil, fmt.Errorf("count due rows of shard %s: %w", sk, err)
		}
		later, laterMore, err := o.countQuery(ctx, DueIndex, shardKey.And(expression.Key(AttrDueAt).GreaterThan(expression.Value(nowMs))), q.Cap)
		if err != nil {
			return nil, fmt.Errorf("count rows not yet due of shard %s: %w", sk, err)
		}
		c := &Counts{Pending: due + later, Due: due, AtLeast: dueMore || laterMore}
		st.Shards[sk] = c
		st.Total.Pending += c.Pending
		st.Total.Due += c.Due
		st.Total.AtLeast = st.Total.AtLeast || c.AtLeast
		oldest, err := o.oldestDue(ctx, sk, nowMs)
		if err != nil {
			return nil, fmt.Errorf("read oldest due row of shard %s: %w", sk, err)
		}
		if !oldest.IsZero() && (st.OldestDue.IsZero() || oldest.Before(st.OldestDue)) {
			st.OldestDue = oldest
		}
	}
	if len(q.DeadQueues) == 0 {
		st.DeadCounted = DeadCountedScan
		if err := o.tallyDead(ctx, q.Cap, st); err != nil {
			return nil, err
		}
	}
	for _, queue := range q.DeadQueues {
		n, more, err := o.countQuery(ctx, DeadIndex, expression.Key(AttrDeadQueue).Equal(expression.Value(queue)), q.Cap)
		if err != nil {
			return nil, fmt.Errorf("count dead letters of %s: %w", queue, err)
		}
		st.Queues[queue] = &Counts{Failed: n, AtLeast: more}
		st.Total.Failed += n
		st.Total.AtLeast = st.Total.AtLeast || more
	}
	st.AtLeast = st.Total.AtLeast
	return st, nil
}

// countQuery counts the entries of an index the key condition selects,
// with count queries (Select COUNT returns no items, but reads the same
// 1 MB a page as any query). With a cap, each page asks for no more than
// would pass it, so it stops at cap+1 entries and reports cap, and more
// (a lower bound).
func (o *Operator) countQuery(ctx context.Context, index string, kc expression.KeyConditionBuilder, limit int) (n int, more bool, err error) {
	expr, err := expression.NewBuilder().WithKeyCondition(kc).Build()
	if err != nil {
		return 0, false, fmt.Errorf("build count query: %w", err)
	}
	in := &dynamodb.QueryInput{
		TableName: aws.String(o.cfg.Table), IndexName: aws.String(index), Select: types.SelectCount,
		KeyConditionExpression: expr.KeyCondition(), ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	}
	for {
		if limit > 0 {
			in.Limit = aws.Int32(int32(min(limit-n, 1<<30-1) + 1))
		}
		out, err := o.api.Query(ctx, in)
		if err != nil {
			return 0, false, err
		}
		n += int(out.Count)
		if limit > 0 && n > limit {
			return limit, true, nil
		}
		if len(out.LastEvaluatedKey) == 0 {
			return n, false, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// oldestDue is the due time of the shard's earliest entry due by nowMs
// (claimed or not), zero if none: one query, Limit 1, in due order.
func (o *Operator) oldestDue(ctx context.Context, shard string, nowMs int64) (time.Time, error) {
	kc := expression.Key(AttrShard).Equal(expression.Value(shard)).And(expression.Key(AttrDueAt).LessThanEqual(expression.Value(nowMs)))
	expr, err := expression.NewBuilder().WithKeyCondition(kc).WithProjection(expression.NamesList(expression.Name(AttrDueAt))).Build()
	if err != nil {
		return time.Time{}, fmt.Errorf("build oldest-due query: %w", err)
	}
	out, err := o.api.Query(ctx, &dynamodb.QueryInput{
		TableName: aws.String(o.cfg.Table), IndexName: aws.String(DueIndex), Limit: aws.Int32(1), ScanIndexForward: aws.Bool(true),
		KeyConditionExpression: expr.KeyCondition(), ProjectionExpression: expr.Projection(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	})
	if err != nil {
		return time.Time{}, err
	}
	// Whatever number a producer wrote (0, a fraction) is the oldest due
	// entry, as the index sorts it: reading it as "none" hid a shard's
	// whole lag (found by review 17c).
	for _, it := range out.Items {
		if v, ok := it[AttrDueAt].(*types.AttributeValueMemberN); ok {
			if ms, err := strconv.ParseFloat(v.Value, 64); err == nil {
				return time.UnixMilli(int64(math.Floor(ms))), nil
			}
		}
	}
	return time.Time{}, nil
}

// tallyDead counts dead letters by queue from a scan of the dead index
// (its queue alone projected), for when the queues are not known: at most
// limit entries (0: all), after which every count it made is a lower
// bound, as is a queue it never reached (not listed at all).
func (o *Operator) tallyDead(ctx context.Context, limit int, st *Stats) error {
	expr, err := expression.NewBuilder().WithProjection(expression.NamesList(expression.Name(AttrDeadQueue))).Build()
	if err != nil {
		return fmt.Errorf("build dead-letter tally: %w", err)
	}
	in := &dynamodb.ScanInput{
		TableName: aws.String(o.cfg.Table), IndexName: aws.String(DeadIndex),
		ProjectionExpression: expr.Projection(), ExpressionAttributeNames: expr.Names(),
	}
	n := 0
	more := false
	for {
		if limit > 0 {
			in.Limit = aws.Int32(int32(min(limit-n, 1<<30-1) + 1))
		}
		out, err := o.api.Scan(ctx, in)
		if err != nil {
			return fmt.Errorf("tally dead letters: %w", err)
		}
		for _, it := range out.Items {
			if limit > 0 && n == limit {
				more = true
				break
			}
			queue := DeadQueueNone
			if v, ok := it[AttrDeadQueue].(*types.AttributeValueMemberS); ok {
				queue = v.Value
			}
			if st.Queues[queue] == nil {
				st.Queues[queue] = &Counts{}
			}
			st.Queues[queue].Failed++
			n++
		}
		if more || len(out.LastEvaluatedKey) == 0 {
			break
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
	st.Total.Failed += n
	if more {
		st.Total.AtLeast = true
		for _, c := range st.Queues {
			c.AtLeast = true
		}
	}
	return nil
}
