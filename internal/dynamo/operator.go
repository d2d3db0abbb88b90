package dynamo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/outflowhq/outflow/internal/outbox"
)

// OperatorAPI is the DynamoDB client surface the operator queries need.
type OperatorAPI interface {
	API
	Scan(ctx context.Context, in *dynamodb.ScanInput, opts ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
}

// Operator adds what operators need to a Store: dead-letter listing,
// purge, and backlog statistics, all read from the sparse indexes.
type Operator struct {
	*Store
	api OperatorAPI
}

// NewOperator returns an operator over the table cfg names.
func NewOperator(api OperatorAPI, cfg Config) (*Operator, error) {
	s, err := New(api, cfg)
	if err != nil {
		return nil, err
	}
	return &Operator{Store: s, api: api}, nil
}

// DeadRef is one dead letter as the dead index holds it, with its ordered
// group and place when WithGroups has read them from the table.
type DeadRef struct {
	Key       string    `json:"key"`
	Queue     string    `json:"queue"`
	Attempt   int       `json:"attempts"`
	FailedAt  time.Time `json:"failed_at"`
	LastError string    `json:"last_error"`
	// Group is the row's FIFO message group, and Seq its place in its
	// ordered group, from 1; 0 for a row in none. The dead index does not
	// project them.
	Group string `json:"group,omitempty"`
	Seq   int64  `json:"seq,omitempty"`
	// PlaceError says why the row's place in its group (prev, seq) cannot
	// be read; such a dead letter holds its group under either policy.
	PlaceError string `json:"place_error,omitempty"`
	// Closed is the row's closed (outbox.Row.Closed), read with its place.
	Closed string `json:"closed,omitempty"`
}

// Link is the dead letter as the head check reads a predecessor.
func (d DeadRef) Link() outbox.Link {
	return outbox.Link{Found: true, Status: outbox.StatusFailed, Queue: d.Queue, Seq: d.Seq, Malformed: d.PlaceError, Closed: d.Closed}
}

// DeadQuery selects dead letters: of one queue (empty: all), failed at or
// after Since (zero: any time), failed before Before (zero: any time).
type DeadQuery struct {
	Queue  string
	Since  time.Time
	Before time.Time
	// perRequest bounds the entries one Query returns (0: DynamoDB's
	// 1 MB): ListDead sets it to its limit, so a page of a queue's dead
	// letters reads about a page of the index, not a megabyte of it.
	perRequest int32
}

// EachDead calls fn for every dead letter the query selects. With a queue
// it queries that queue's partition of the dead index, newest first;
// without one it scans the dead index, which holds only failed rows, in no
// order. fn returning an error stops the walk.
func (o *Operator) EachDead(ctx context.Context, q DeadQuery, fn func(DeadRef) error) error {
	page, err := o.deadPages(q)
	if err != nil {
		return err
	}
	var start map[string]types.AttributeValue
	for {
		items, next, err := page(ctx, start)
		if err != nil {
			return fmt.Errorf("read dead index: %w", err)
		}
		for _, av := range items {
			if err := fn(deadRefOf(av)); err != nil {
				return err
			}
		}
		if len(next) == 0 {
			return nil
		}
		start = next
	}
}

// deadRefOf reads a dead-index entry attribute by attribute: the keys are
// typed by DynamoDB, and an odd projected value (a fractional attempt, a
// history that is not a string) costs that field alone, never the key
// (one decode of the whole entry stopped at the first odd field, and bulk
// redrives then acted on an empty key: found by review 17c).
func deadRefOf(av map[string]types.AttributeValue) DeadRef {
	var d DeadRef
	_ = attributevalue.Unmarshal(av[AttrKey], &d.Key)
	_ = attributevalue.Unmarshal(av[AttrDeadQueue], &d.Queue)
	_ = attributevalue.Unmarshal(av[AttrLastError], &d.LastError)
	var attempt, failedAt float64
	if attributevalue.Unmarshal(av[AttrAttempt], &attempt) == nil {
		d.Attempt = int(attempt)
	}
	if attributevalue.Unmarshal(av[AttrFailedAt], &failedAt) == nil {
		d.FailedAt = fromMs(int64(failedAt))
	}
	return d
}

// limitOf is a request's Limit: nil for none.
func limitOf(n int32) *int32 {
	if n <= 0 {
		return nil
	}
	return aws.Int32(n)
}

type deadPage func(ctx context.Context, start map[string]types.AttributeValue) (items []map[string]types.AttributeValue, next map[string]types.AttributeValue, err error)

// deadPages builds the request for one page of the dead index: a Query of
// the queue's partition with the time range as key condition, or a Scan
// with it as a filter.
func (o *Operator) deadPages(q DeadQuery) (deadPage, error) {
	since, before := int64(0), int64(math.MaxInt64)
	if !q.Since.IsZero() {
		since = q.Since.UnixMilli()
	}
	if !q.Before.IsZero() {
		before = q.Before.UnixMilli() - 1
	}
	if q.Queue != "" {
		kc := expression.Key(AttrDeadQueue).Equal(expression.Value(q.Queue)).
			And(expression.Key(AttrFailedAt).Between(expression.Value(since), expression.Value(before)))
		expr, err := expression.NewBuilder().WithKeyCondition(kc).Build()
		if err != nil {
			return nil, fmt.Errorf("build dead-letter query: %w", err)
		}
		return func(ctx context.Context, start map[string]types.AttributeValue) ([]map[string]types.AttributeValue, map[string]types.AttributeValue, error) {
			out, err := o.api.Query(ctx, &dynamodb.QueryInput{
				TableName: aws.String(o.cfg.Table), IndexName: aws.String(DeadIndex),
				KeyConditionExpression: expr.KeyCondition(), ExpressionAttributeNames: expr.Names(),
				ExpressionAttributeValues: expr.Values(), ScanIndexForward: aws.Bool(false), ExclusiveStartKey: start,
				Limit: limitOf(q.perRequest),
			})
			if err != nil {
				return nil, nil, err
			}
			return out.Items, out.LastEvaluatedKey, nil
		}, nil
	}
	filter := expression.Name(AttrFailedAt).Between(expression.Value(since), expression.Value(before))
	expr, err := expression.NewBuilder().WithFilter(filter).Build()
	if err != nil {
		return nil, fmt.Errorf("build dead-letter scan: %w", err)
	}
	return func(ctx context.Context, start map[string]types.AttributeValue) ([]map[string]types.AttributeValue, map[string]types.AttributeValue, error) {
		out, err := o.api.Scan(ctx, &dynamodb.ScanInput{
			TableName: aws.String(o.cfg.Table), IndexName: aws.String(DeadIndex),
			FilterExpression: expr.Filter(), ExpressionAttributeNames: expr.Names(),
			ExpressionAttributeValues: expr.Values(), ExclusiveStartKey: start,
		})
		if err != nil {
			return nil, nil, err
		}
		return out.Items, out.LastEvaluatedKey, nil
	}, nil
}

// ListDead returns up to limit dead letters (0: all), newest first. With
// a queue, the index gives them newest first and the read stops at limit;
// without one, it keeps the newest limit of those read so far, so a limit
// bounds its memory whatever the number of dead letters.
func (o *Operator) ListDead(ctx context.Context, q DeadQuery, limit int) ([]DeadRef, error) {
	if q.Queue != "" && limit > 0 {
		q.perRequest = int32(min(limit, math.MaxInt32))
	}
	var out []DeadRef
	newest := func(a, b DeadRef) int { return b.FailedAt.Compare(a.FailedAt) }
	err := o.EachDead(ctx, q, func(d DeadRef) error {
		out = append(out, d)
		if limit > 0 && q.Queue != "" && len(out) == limit {
			return errListed
		}
		if limit > 0 && len(out) >= 2*max(limit, 512) {
			// A stable sort keeps the order a full sort would give: every
			// dead letter dropped has limit others ahead of it.
			slices.SortStableFunc(out, newest)
			out = slices.Clip(out[:limit])
			out = append(make([]DeadRef, 0, 2*max(limit, 512)), out...)
		}
		return nil
	})
	if err != nil && !errors.Is(err, errListed) {
		return nil, err
	}
	slices.SortStableFunc(out, newest)
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// errListed stops a listing that has what it needs.
var errListed = errors.New("listed enough")

// UnsureBound is which dead letters a purge holds back for an unsure
// send: those whose unsure_at is after By, unless it is after Implausible
// (no dispatcher's clock runs that far ahead) or not a number. The zero
// value holds none.
type UnsureBound struct{ By, Implausible time.Time }

// Purge, at now, removes a dead letter that failed at or before failedBy (the
// moment the operator saw it; zero for any) and that unsure does not hold
// back. Only such rows are purged; any other, a row redriven since or
// one that failed again after failedBy, a dead letter the operator never
// saw, one a copy of which may still land, gives a *outbox.ConflictError
// whose Current says which.
//
// A dead letter with no place in an ordered group is deleted, one write.
// One with a place (seq and group, on a FIFO route) is not: its consumer
// counts places, and would wait for ever for one never sent. It goes back
// to pending, due now, on its group's shard, marked closed ("purged"),
// and from now the dispatcher sends in its place the message that closes it, then
// settles it as delivered; its successors follow as they follow any row.
// Telling the two apart costs such a row one refused write (the delete's),
// as a redrive does (see placing).
func (o *Operator) Purge(ctx context.Context, key string, now, failedBy time.Time, unsure UnsureBound) error {
	cond := o.purgeable(failedBy, unsure)
	// Deleted at once: a dead letter with no place, or one whose place
	// was closed already (skip sent its closing message). One whose
	// closing message failed for good (unsent, or unsure: it may not have
	// landed) still holds its group: its closing message is tried again,
	// as for an open place. After a purge's failed (purge-unsent,
	// purge-unsure), a second purge deletes it.
	closedAlready := expression.AttributeExists(expression.Name(AttrClosed)).And(expression.Name(AttrClosed).NotEqual(expression.Value(outbox.ClosedUnsent))).
		And(expression.Name(AttrClosed).NotEqual(expression.Value(outbox.ClosedUnsure)))
	expr, err := expression.NewBuilder().WithCondition(cond.And(unordered().Or(closedAlready))).Build()
	if err != nil {
		return fmt.Errorf("build purge condition: %w", err)
	}
	_, err = o.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: aws.String(o.cfg.Table), Key: keyOf(key),
		ConditionExpression: expr.Condition(), ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) || ccf.Item == nil || ccf.Item[AttrSeq] == nil || ccf.Item[AttrGroup] == nil {
		return o.wrap("purge", key, err)
	}
	row, same := placementOf(key, ccf.Item)
	if _, _, malformed := readLink(ccf.Item); malformed != "" || !ordered(row) || !outbox.FIFORoute(row.Queue) {
		// A place no producer of Outflow's writes (a seq, group or prev
		// of the wrong type, a group off a FIFO route): no place a
		// consumer counts to close. Deleted, as any other dead letter.
		return o.purgeDelete(ctx, key, o.purgeable(failedBy, unsure).And(same))
	}
	closeUpd := expression.Set(expression.Name(AttrStatus), expression.Value(outbox.StatusPending)).
		Set(expression.Name(AttrAttempt), expression.Value(0)).
		Set(expression.Name(AttrDueAt), expression.Value(now.UnixMilli())).
		Set(expression.Name(AttrShard), expression.Value(ShardFor(row, o.cfg.Shards))).
		Set(expression.Name(AttrClosed), expression.Value(outbox.ClosedPurged)).
		Remove(expression.Name(AttrFailedAt)).Remove(expression.Name(AttrDeadQueue))
	open := expression.AttributeNotExists(expression.Name(AttrClosed)).Or(expression.Name(AttrClosed).Equal(expression.Value(outbox.ClosedUnsent))).
		Or(expression.Name(AttrClosed).Equal(expression.Value(outbox.ClosedUnsure)))
	_, err = o.update(ctx, "purge", key, o.purgeable(failedBy, unsure).And(same).And(open), closeUpd, types.ReturnValueNone)
	return err
}

// purgeDelete deletes the dead letter key under cond.
func (o *Operator) purgeDelete(ctx context.Context, key string, cond expression.ConditionBuilder) error {
	expr, err := expression.NewBuilder().WithCondition(cond).Build()
	if err != nil {
		return fmt.Errorf("build purge condition: %w", err)
	}
	_, err = o.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: aws.String(o.cfg.Table), Key: keyOf(key),
		ConditionExpression: expr.Condition(), ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	return o.wrap("purge", key, err)
}

// purgeable is the condition under which Purge takes a row: failed, at or
// before failedBy, and not held back by unsure. It builds afresh for each
// write (a builder shares its operations with every copy).
func (o *Operator) purgeable(failedBy time.Time, unsure UnsureBound) expression.ConditionBuilder {
	cond := expression.Name(AttrStatus).Equal(expression.Value(outbox.StatusFailed))
	if !failedBy.IsZero() {
		failed := expression.Name(AttrFailedAt)
		cond = cond.And(expression.Or(expression.AttributeNotExists(failed), failed.LessThanEqual(expression.Value(failedBy.UnixMilli()))))
	}
	if !unsure.By.IsZero() {
		at := expression.Name(AttrUnsureAt)
		// The type test comes first: a comparison of a string with a
		// number is no condition moto can evaluate.
		free := expression.Or(expression.AttributeNotExists(at), expression.Not(at.AttributeType(expression.Number)), at.LessThanEqual(expression.Value(unsure.By.UnixMilli())))
		if !unsure.Implausible.IsZero() {
			free = free.Or(at.GreaterThan(expression.Value(unsure.Implausible.UnixMilli())))
		}
		cond = cond.And(free)
	}
	return cond
}

// WithGroups reads the group and the place in its ordered group (Group,
// Seq) of each dead letter of a FIFO route from the table, 100 keys per
// request, with an eventually consistent read that costs as much as
// reading the whole item. Only FIFO routes, whose names end in .fifo, have
// groups: their dead letters are returned as they are, unread. It returns
// the dead letters in order, leaving out those of FIFO routes that are no
// longer dead letters (redriven or purged since the dead index was read).
func (o *Operator) WithGroups(ctx context.Context, dead []DeadRef) ([]DeadRef, error) {
	type place struct {
		status, group, err, closed string
		seq                        int64
	}
	var keys []string
	for _, d := range dead {
		if outbox.FIFORoute(d.Queue) {
			keys = append(keys, d.Key)
		}
	}
	places := make(map[string]place, len(keys))
	err := o.batchGet(ctx, keys, []string{AttrStatus, AttrGroup, AttrSeq, AttrPrev, AttrClosed}, func(key string, item map[string]types.AttributeValue) {
		// Each attribute on its own: one of the wrong type must not hide
		// the others.
		var p place
		if s, ok := item[AttrStatus].(*types.AttributeValueMemberS); ok {
			p.status = s.Value
		}
		if g, ok := item[AttrGroup].(*types.AttributeValueMemberS); ok {
			p.group = g.Value
		}
		if c, ok := item[AttrClosed].(*types.AttributeValueMemberS); ok {
			p.closed = c.Value
		}
		_, p.seq, p.err = readLink(item)
		places[key] = p
	})
	if err != nil {
		return nil, fmt.Errorf("read groups of dead letters: %w", err)
	}
	out := make([]DeadRef, 0, len(dead))
	for _, d := range dead {
		if outbox.FIFORoute(d.Queue) {
			p, ok := places[d.Key]
			if !ok || p.status != string(outbox.StatusFailed) {
				continue
			}
			d.Group, d.Seq, d.PlaceError, d.Closed = p.group, p.seq, p.err, p.closed
		}
		out = append(out, d)
	}
	return out, nil
}

// Counts is how many rows are in each state.
type Counts struct {
	// Pending rows wait in the due index; Due is those of them due now.
	Pending int `json:"pending"`
	Due     int `json:"due"`
	Claimed int `json:"claimed"`
	Failed  int `json:"failed"`
	// AtLeast marks counts that reached Count's cap: lower bounds.
	AtLeast bool `json:"at_least,omitempty"`
}

// Stats is the backlog, per queue and per shard.
type Stats struct {
	Queues map[string]*Counts `json:"queues"`
	Shards map[string]*Counts `json:"shards"`
	Total  Counts             `json:"total"`
	// OldestDue is the earliest due time among due rows; zero if none.
	OldestDue time.Time `json:"oldest_due,omitzero"`
	// BlockedGroups counts the ordered groups (queue and group) a dead
	// letter holds, as the caller's blocks says (the first, by place, that
	// does); OldestBlocked is the earliest failure time of those dead
	// letters, zero if none.
	BlockedGroups int       `json:"blocked_groups"`
	OldestBlocked time.Time `json:"oldest_blocked,omitzero"`
	// Stray is what the sweep's audit found of rows on a shard the sweep
	// never queries, which the per-shard counts above cannot see: read
	// from the audit item, not counted afresh.
	Stray AuditCounts `json:"stray"`
	// Exact is true when every due row's status and every dead letter was
	// read (Stats): Claimed is told from Pending, Queues hold pending and
	// due rows too. False for Count, whose Due includes claimed rows,
	// whose Claimed is 0, whose Queues hold dead letters only, and which
	// counts no blocked group unless CountBlocked adds them.
	Exact bool `json:"exact"`
	// BlockedCounted is true when BlockedGroups and OldestBlocked were
	// counted (Stats with blocks, or CountBlocked).
	BlockedCounted bool `json:"blocked_counted"`
	// Cap is Count's cap on each count, 0 for none; AtLeast is set when
	// some count reached it, and is a lower bound.
	Cap     int  `json:"cap"`
	AtLeast bool `json:"at_least"`
	// DeadCounted says how dead letters were counted: DeadCountedQueues,
	// DeadCountedScan or DeadCountedAll.
	DeadCounted string `json:"dead_counted"`
}

// Stats counts rows from the indexes: the due index (pending and claimed,
// with queue projected) and the dead index (failed). Rows not yet due are
// pending by construction; only rows already due are read from the table
// (status alone, 100 per request), because a claim does not show in the
// index. No table scan.
//
// With blocks, Stats also counts the blocked ordered groups: it reads the
// group and place of each dead letter of a FIFO route (only those have
// groups) with WithGroups, and asks blocks of each group's dead letters,
// in place order, whether it holds its group, until one does. A nil blocks
// counts none and reads nothing more.
//
// Stray rows, on a shard outside 0..Shards-1, are not in these counts:
// Stray reports what the sweep's audit last found (one read of its item).
func (o *Operator) Stats(ctx context.Context, now time.Time, blocks func(DeadRef) bool) (*Stats, error) {
	st := &Stats{Queues: map[string]*Counts{}, Shards: map[string]*Counts{}, Exact: true, DeadCounted: DeadCountedAll}
	stray, err := o.Audited(ctx)
	if err != nil {
		return nil, err
	}
	st.Stray = stray
	counts := func(m map[string]*Counts, k string) *Counts {
		if m[k] == nil {
			m[k] = &Counts{}
		}
		return m[k]
	}
	type dueRow struct{ queue, shard string }
	due := map[string]dueRow{}
	for shard := range o.cfg.Shards {
		sk := strconv.Itoa(shard)
		var start map[string]types.AttributeValue
		for {
			out, err := o.api.Query(ctx, &dynamodb.QueryInput{
				TableName: aws.String(o.cfg.Table), IndexName: aws.String(DueIndex),
				KeyConditionExpression:    aws.String("#s = :s"),
				ExpressionAttributeNames:  map[string]string{"#s": AttrShard},
				ExpressionAttributeValues: map[string]types.AttributeValue{":s": &types.AttributeValueMemberS{Value: sk}},
				ExclusiveStartKey:         start,
			})
			if err != nil {
				return nil, fmt.Errorf("query shard %s: %w", sk, err)
			}
			for _, av := range out.Items {
				var it struct {
					Key   string `dynamodbav:"pk"`
					Queue string `dynamodbav:"queue"`
					DueAt int64  `dynamodbav:"due_at"`
				}
				_ = attributevalue.UnmarshalMap(av, &it)
				if at := fromMs(it.DueAt); at.After(now) {
					counts(st.Queues, it.Queue).Pending++
					counts(st.Shards, sk).Pending++
					st.Total.Pending++
					continue
				} else if st.OldestDue.IsZero() || at.Before(st.OldestDue) {
					st.OldestDue = at
				}
				due[it.Key] = dueRow{queue: it.Queue, shard: sk}
			}
			start = out.LastEvaluatedKey
			if len(start) == 0 {
				break
			}
		}
	}
	keys := make([]string, 0, len(due))
	for k := range due {
		keys = append(keys, k)
	}
	statuses, err := o.statuses(ctx, keys)
	if err != nil {
		return nil, err
	}
	for k, row := range due {
		q, s := counts(st.Queues, row.queue), counts(st.Shards, row.shard)
		if statuses[k] == string(outbox.StatusClaimed) {
			q.Claimed++
			s.Claimed++
			st.Total.Claimed++
		} else {
			q.Pending++
			q.Due++
			s.Pending++
			s.Due++
			st.Total.Pending++
			st.Total.Due++
		}
	}
	var ordered []DeadRef
	err = o.EachDead(ctx, DeadQuery{}, func(d DeadRef) error {
		counts(st.Queues, d.Queue).Failed++
		st.Total.Failed++
		if blocks != nil && outbox.FIFORoute(d.Queue) {
			ordered = append(ordered, d)
		}
		return nil
	})
	if err != nil || blocks == nil {
		return st, err
	}
	if err := o.blocked(ctx, ordered, blocks, st); err != nil {
		return nil, err
	}
	return st, nil
}

// CountBlocked adds to st the blocked ordered groups, as Stats counts them
// with blocks: it reads every dead letter of a FIFO route (from the dead
// index, then its group and place from the table), so it costs requests
// in proportion to them. Count leaves this out; outflow stats asks for it
// with --blocked.
func (o *Operator) CountBlocked(ctx context.Context, blocks func(DeadRef) bool, st *Stats) error {
	heads, err := o.BlockedGroups(ctx, blocks)
	if err != nil {
		return err
	}
	st.BlockedCounted = true
	st.BlockedGroups = len(heads)
	if len(heads) > 0 {
		st.OldestBlocked = heads[0].FailedAt
	}
	return nil
}

// blocked counts the groups the dead letters of FIFO routes block into st.
func (o *Operator) blocked(ctx context.Context, ordered []DeadRef, blocks func(DeadRef) bool, st *Stats) error {
	st.BlockedCounted = true
	heads, err := o.heads(ctx, ordered, blocks)
	if err != nil {
		return err
	}
	st.BlockedGroups = len(heads)
	for _, d := range heads {
		if st.OldestBlocked.IsZero() || d.FailedAt.Before(st.OldestBlocked) {
			st.OldestBlocked = d.FailedAt
		}
	}
	return nil
}

// BlockedGroups returns the dead letter that holds each blocked ordered
// group, as CountBlocked counts them (the first, by place, that blocks),
// the longest dead first. It reads every dead letter of a FIFO route.
func (o *Operator) BlockedGroups(ctx context.Context, blocks func(DeadRef) bool) ([]DeadRef, error) {
	var ordered []DeadRef
	err := o.EachDead(ctx, DeadQuery{}, func(d DeadRef) error {
		if outbox.FIFORoute(d.Queue) {
			ordered = append(ordered, d)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	heads, err := o.heads(ctx, ordered, blocks)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(heads, func(a, b DeadRef) int {
		return cmp.Or(a.FailedAt.Compare(b.FailedAt), cmp.Compare(a.Queue, b.Queue), cmp.Compare(a.Group, b.Group))
	})
	return heads, nil
}

// heads is the dead letter that holds each group the dead letters of FIFO
// routes block, in no order.
func (o *Operator) heads(ctx context.Context, ordered []DeadRef, blocks func(DeadRef) bool) ([]DeadRef, error) {
	if len(ordered) == 0 {
		return nil, nil
	}
	ordered, err := o.WithGroups(ctx, ordered)
	if err != nil {
		return nil, err
	}
	// A group is held by its first dead letter, by place, that blocks: under
	// block, its earliest; under skip, one whose place cannot be read.
	type group struct{ queue, name string }
	groups := map[group][]DeadRef{}
	for _, d := range ordered {
		if d.Seq > 0 || d.PlaceError != "" {
			g := group{d.Queue, d.Group}
			groups[g] = append(groups[g], d)
		}
	}
	var heads []DeadRef
	for _, dead := range groups {
		slices.SortFunc(dead, func(a, b DeadRef) int { return cmp.Compare(a.Seq, b.Seq) })
		for _, d := range dead {
			if blocks(d) {
				heads = append(heads, d)
				break
			}
		}
	}
	return heads, nil
}

// statuses reads the status of each key, 100 keys per request.
func (o *Operator) statuses(ctx context.Context, keys []string) (map[string]string, error) {
	out := make(map[string]string, len(keys))
	err := o.batchGet(ctx, keys, []string{AttrStatus}, func(key string, item map[string]types.AttributeValue) {
		if v, ok := item[AttrStatus].(*types.AttributeValueMemberS); ok {
			out[key] = v.Value
		}
	})
	if err != nil {
		return nil, fmt.Errorf("read statuses: %w", err)
	}
	return out, nil
}

// batchGet reads attrs of each key, 100 keys per request, and calls fn
// with each item found; keys with no item are skipped. Throttled keys are
// read again after a pause, until the context ends.
func (o *Operator) batchGet(ctx context.Context, keys []string, attrs []string, fn func(key string, item map[string]types.AttributeValue)) error {
	names := map[string]string{"#k": AttrKey}
	proj := "#k"
	for i, a := range attrs {
		ph := "#a" + strconv.Itoa(i)
		names[ph] = a
		proj += ", " + ph
	}
	for chunk := range slices.Chunk(keys, 100) {
		req := map[string]types.KeysAndAttributes{o.cfg.Table: {
			Keys:                     make([]map[string]types.AttributeValue, 0, len(chunk)),
			ProjectionExpression:     aws.String(proj),
			ExpressionAttributeNames: names,
		}}
		for _, k := range chunk {
			ka := req[o.cfg.Table]
			ka.Keys = append(ka.Keys, keyOf(k))
			req[o.cfg.Table] = ka
		}
		for len(req) > 0 {
			res, err := o.api.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
			if err != nil {
				return err
			}
			for _, item := range res.Responses[o.cfg.Table] {
				if k, ok := item[AttrKey].(*types.AttributeValueMemberS); ok {
					fn(k.Value, item)
				}
			}
			req = res.UnprocessedKeys
			if len(req) > 0 {
				// Throttled: back off before the rest, unless the caller gave up.
				select {
				case <-time.After(50 * time.Millisecond):
				case <-ctx.Done():
					return ctx.Err()
				}
			}
		}
	}
	return nil
}
