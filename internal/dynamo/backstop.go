package dynamo

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/outflowhq/outflow/internal/outbox"
)

// A lean row (staged with no shard: Producer's Config.Lean) is in no
// index. Its stream record is its only path to the wake, and the stream
// can fail it for good: a mapping disabled or throttled past the
// stream's 24-hour retention, a batch whose retries run out. The
// event source mapping's on-failure destination reports only batches the
// mapping read, never records that expired unread, so the one thing that
// finds every such row is the table itself. The backstop scans it a few
// pages per sweep, resuming where the last run stopped, for pending or
// claimed rows with no shard older than a threshold, and puts each in the
// due index, where the sweep delivers it as any other.

// BackstopKey is the key of the item that holds the backstop's place in
// the table and what it found. Like the audit item it has no status and
// no index keys, and no row can have its key (a row key holds no space).
const BackstopKey = "backstop lean"

// Attributes of the backstop item.
const (
	attrBackstopCursor        = "cursor"
	attrBackstopPassStart     = "pass_started_at"
	attrBackstopPass          = "pass_found"
	attrBackstopLastPass      = "last_pass_found"
	attrBackstopLastPassStart = "last_pass_started_at"
	attrBackstopLastPassEnd   = "last_pass_ended_at"
	attrBackstopTotal         = "found_total"
	attrBackstopLongest       = "longest_wait_ms"
	attrBackstopLeanAt        = "lean_at"
)

// Default backstop budget: four Scan pages of up to 1,000 items each per
// run (a page stops at 1 MB too), indexing for at most a quarter of the
// run's time, eight rows at a time.
const (
	DefaultBackstopPages     = 4
	DefaultBackstopPageSize  = 1000
	DefaultBackstopTimeShare = 0.25
	// DefaultBackstopDrain, 0, keeps the backstop scanning for ever once
	// the table has had lean on: producers read the mode when they load
	// the published configuration, so one started before a switch to off
	// may stage lean rows until it restarts, however long that is, and
	// the first of them the stream loses would otherwise wait for ever.
	// A positive drain stops it that long after lean was last on or a
	// lean row last found, for operators who know every producer
	// restarted.
	DefaultBackstopDrain time.Duration = 0
)

// backstopIndexers is how many index writes a backstop run makes at once.
const backstopIndexers = 8

// Backstop finds lean rows the stream never delivered, and puts them in
// the due index, within a budget of Scan pages and of time per run.
type Backstop struct {
	*Store
	api AuditAPI
	// Pages is the most Scan requests one run makes, PageSize the most
	// items each evaluates (DynamoDB also ends a page at 1 MB read).
	Pages, PageSize int
	// TimeShare is the fraction of the time left before the context's
	// deadline that a run may spend, as Audit.TimeShare.
	TimeShare float64
	// After is how old a row must be (by its created_at) before the
	// backstop takes it for missed: the wake's grace, past which the wake
	// would claim rather than send it, and a sweep would take it if it
	// were indexed.
	After time.Duration
	// Lean is the dispatcher's OUTFLOW_LEAN. Off, the backstop still runs
	// on a table that has had lean on (NoteLean, or a run with Lean):
	// for ever with Drain 0, or until Drain has passed since lean was
	// last on or a run last found an unindexed row.
	Lean  bool
	Drain time.Duration
}

// NewBackstop returns the backstop of the table cfg names, with the
// default budget, for a dispatcher that runs lean or not.
func NewBackstop(api AuditAPI, cfg Config, after time.Duration, lean bool) (*Backstop, error) {
	s, err := New(api, cfg)
	if err != nil {
		return nil, err
	}
	return &Backstop{Store: s, api: api, Pages: DefaultBackstopPages, PageSize: DefaultBackstopPageSize,
		TimeShare: DefaultBackstopTimeShare, After: after, Lean: lean, Drain: DefaultBackstopDrain}, nil
}

// BackstopResult is what one backstop run did.
type BackstopResult struct {
	// Ran is false when the backstop had nothing to do: lean is off and
	// has been for longer than its drain.
	Ran bool
	// Pages counts the Scan requests, Scanned the items they evaluated,
	// ReadUnits the read capacity they consumed as DynamoDB reported it
	// (0 where it reports none).
	Pages, Scanned int
	ReadUnits      float64
	// Indexed counts the rows put in the due index; Changed those another
	// writer settled, claimed or indexed between the scan and the write;
	// Errors the writes that failed (the next pass finds the row again).
	Indexed, Changed, Errors int
	// Keys lists the rows indexed, in scan order, for the log.
	Keys []string
	// DeadLettered counts the items DynamoDB refused the index write for
	// good (an item at its size limit has no room for a shard), each
	// dead-lettered with the reason instead, so none holds the pass; Refused
	// names them.
	DeadLettered int
	Refused      []string
	// LongestWait is the oldest indexed row's age: how long the stream's
	// miss had held it back.
	LongestWait time.Duration
	// PassDone reports that the run reached the end of the table.
	PassDone bool
}

// BackstopCounts is what the backstop has found, as its item holds it.
type BackstopCounts struct {
	// LastPass counts the rows the last complete pass indexed; ThisPass
	// those of the pass under way, begun at PassStarted.
	LastPass int `json:"last_pass"`
	ThisPass int `json:"this_pass"`
	// Total counts every row any run indexed.
	Total int `json:"total"`
	// LongestWait is the longest any indexed row had waited.
	LongestWait time.Duration `json:"longest_wait"`
	// PassStarted is when the pass under way began; LastPassStarted and
	// LastPassEnded bound the last complete one (zero before the first).
	PassStarted     time.Time `json:"pass_started,omitzero"`
	LastPassStarted time.Time `json:"last_pass_started,omitzero"`
	LastPassEnded   time.Time `json:"last_pass_ended,omitzero"`
	// LeanAt is the last time a run saw lean on or found an unindexed row.
	LeanAt time.Time `json:"lean_at,omitzero"`
}

// backstopState is the backstop item as read.
type backstopState struct {
	BackstopCounts
	cursor  map[string]types.AttributeValue
	version int64
}

// due reports whether a run at now has work: lean is on, or was within
// the drain.
func (b *Backstop) due(st backstopState, now time.Time) bool {
	return b.Lean || (!st.LeanAt.IsZero() && (b.Drain == 0 || now.Before(st.LeanAt.Add(b.Drain))))
}

// NoteLean records in the backstop item that the table runs lean as of
// now, so its backstop runs even if lean is switched off before a
// scheduled sweep saw it on: a function that publishes lean calls it. It
// moves the item's version, so a backstop run that read the item before
// cannot save over it.
func (s *Store) NoteLean(ctx context.Context, now time.Time) error {
	return s.updateStateItem(ctx, BackstopKey, "backstop", expression.Set(expression.Name(attrBackstopLeanAt), expression.Value(now.UnixMilli())).
		Add(expression.Name(attrStateVersion), expression.Value(1)))
}

// Run scans the next pages of the table, from where the last run stopped,
// for pending or claimed rows with no shard created more than After ago,
// and gives each its shard with a write conditional on it still having
// none, so the sweep delivers it. It saves its place and counts in the
// backstop item. The saved place never passes an item whose write failed
// or was not begun, so the next run reads it again. The error joins every
// request that failed.
func (b *Backstop) Run(ctx context.Context, now time.Time) (BackstopResult, error) {
	var res BackstopResult
	st, err := b.loadBackstop(ctx, true)
	if err != nil {
		return res, err
	}
	if !b.due(st, now) {
		return res, nil
	}
	res.Ran = true
	work, cancel := auditWork(ctx, b.TimeShare)
	defer cancel()
	next := st
	if next.cursor == nil {
		next.PassStarted = now
	}
	var errs []error
	next.cursor, res.PassDone, errs = b.pages(ctx, work, next.cursor, now, b.Pages, &res)
	if res.PassDone {
		next.LastPass, next.ThisPass = next.ThisPass+res.Indexed, 0
		next.LastPassStarted, next.LastPassEnded, next.PassStarted = next.PassStarted, now, time.Time{}
	} else {
		next.ThisPass += res.Indexed
	}
	next.Total += res.Indexed
	next.LongestWait = max(next.LongestWait, res.LongestWait)
	if b.Lean || res.Indexed > 0 {
		next.LeanAt = now
	}
	if maps.EqualFunc(next.cursor, st.cursor, sameValue) && next.BackstopCounts == st.BackstopCounts {
		return res, errors.Join(errs...)
	}
	if err := b.saveBackstop(ctx, st, next, res.Indexed); err != nil {
		errs = append(errs, err)
	}
	return res, errors.Join(errs...)
}

// Pass scans the whole table from its start, whatever place the
// scheduled runs have reached and whatever Lean says, until the end or
// ctx's: an operator's pass by hand (outflow sweep --backstop). It keeps
// a place of its own and leaves theirs; the rows it indexes go into the
// item's total, and mark the table as having lean rows (LeanAt), so the
// scheduled backstop runs from then on. PassDone reports it reached the
// end.
func (b *Backstop) Pass(ctx context.Context, now time.Time) (BackstopResult, error) {
	res := BackstopResult{Ran: true}
	var cursor map[string]types.AttributeValue
	var errs []error
	for ctx.Err() == nil && !res.PassDone {
		var pageErrs []error
		cursor, res.PassDone, pageErrs = b.pages(ctx, ctx, cursor, now, 1, &res)
		if errs = append(errs, pageErrs...); len(pageErrs) > 0 {
			break
		}
	}
	if res.Indexed > 0 {
		if err := b.updateStateItem(ctx, BackstopKey, "backstop", expression.Add(expression.Name(attrBackstopTotal), expression.Value(res.Indexed)).
			Set(expression.Name(attrBackstopLeanAt), expression.Value(now.UnixMilli()))); err != nil {
			errs = append(errs, err)
		}
	}
	return res, errors.Join(errs...)
}

// pages scans up to n pages of the table from cursor, indexing each
// missed row found, and adds what it did to res. It returns the place to
// go on from, which never passes an item whose write failed or was not
// begun (the next scan reads it again), and whether the table ended.
func (b *Backstop) pages(ctx, work context.Context, cursor map[string]types.AttributeValue, now time.Time, n int, res *BackstopResult) (map[string]types.AttributeValue, bool, []error) {
	cutoff := now.Add(-b.After).UnixMilli()
	var errs []error
	for range n {
		if work.Err() != nil {
			break
		}
		out, err := b.api.Scan(work, b.scanInput(cursor, cutoff))
		if err != nil {
			if work.Err() == nil {
				errs = append(errs, fmt.Errorf("backstop scan of the table: %w", err))
			}
			break
		}
		res.Pages++
		res.Scanned += int(out.ScannedCount)
		if out.ConsumedCapacity != nil && out.ConsumedCapacity.CapacityUnits != nil {
			res.ReadUnits += *out.ConsumedCapacity.CapacityUnits
		}
		outcomes := b.indexAll(ctx, work, out.Items, now)
		stop := -1
		for i, o := range outcomes {
			switch o.outcome {
			case "indexed":
				res.Indexed++
				res.Keys = append(res.Keys, o.key)
				res.LongestWait = max(res.LongestWait, o.waited)
			case "dead-lettered":
				res.DeadLettered++
				res.Refused = append(res.Refused, o.key)
			case "changed":
				res.Changed++
			case "error":
				res.Errors++
				errs = append(errs, fmt.Errorf("backstop index of %q: %w", o.key, o.err))
			}
			if stop < 0 && (o.outcome == "" || o.outcome == "error") {
				stop = i
			}
		}
		if stop >= 0 {
			if stop > 0 {
				cursor = keyOf(scannedKey(out.Items[stop-1]))
			}
			return cursor, false, errs
		}
		if cursor = out.LastEvaluatedKey; len(cursor) == 0 {
			return nil, true, errs
		}
	}
	return cursor, false, errs
}

// scanInput is one page of the scan: the filter leaves only unindexed
// pending or claimed rows old enough, but DynamoDB charges for every item
// the page evaluates (the filter applies after the read), so a page costs
// what the table's items weigh, done and dead rows included.
func (b *Backstop) scanInput(cursor map[string]types.AttributeValue, cutoff int64) *dynamodb.ScanInput {
	// An item with no numeric created_at (written by hand, or by another
	// producer) is found whatever its age, so the sweep claims it and
	// dead-letters it with its reason. The comparison is guarded by the
	// type, as the claim's are: moto fails a Scan that compares a string
	// with a number, where DynamoDB takes it for false.
	created := expression.Name(AttrCreatedAt)
	old := expression.AttributeNotExists(created).
		Or(expression.Not(created.AttributeType(expression.Number))).
		Or(created.AttributeType(expression.Number).And(created.LessThan(expression.Value(cutoff))))
	filter := expression.AttributeNotExists(expression.Name(AttrShard)).
		And(expression.Name(AttrStatus).In(expression.Value(outbox.StatusPending), expression.Value(outbox.StatusClaimed))).
		And(old)
	proj := expression.NamesList(expression.Name(AttrKey), expression.Name(AttrQueue), expression.Name(AttrGroup),
		expression.Name(AttrSeq), expression.Name(AttrCreatedAt))
	expr, _ := expression.NewBuilder().WithFilter(filter).WithProjection(proj).Build() // static: cannot fail
	return &dynamodb.ScanInput{
		TableName: aws.String(b.cfg.Table), Limit: aws.Int32(int32(b.PageSize)), ExclusiveStartKey: cursor,
		FilterExpression: expr.Filter(), ProjectionExpression: expr.Projection(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
	}
}

// scannedKey is a scanned item's key, "" if it has none.
func scannedKey(av map[string]types.AttributeValue) string {
	k, _ := av[AttrKey].(*types.AttributeValueMemberS)
	if k == nil {
		return ""
	}
	return k.Value
}

// indexed is one found row's outcome: "indexed", "changed", "error", or
// "" for a write never begun or cut off.
type indexed struct {
	key, outcome string
	waited       time.Duration
	err          error
}

// indexAll indexes a page's rows, backstopIndexers at a time. As the
// audit's moves, a write begins only while work lasts and runs with ctx,
// so one under way when the time share ends finishes and is counted.
func (b *Backstop) indexAll(ctx, work context.Context, items []map[string]types.AttributeValue, now time.Time) []indexed {
	outs := make([]indexed, len(items))
	sem := make(chan struct{}, backstopIndexers)
	var wg sync.WaitGroup
	for i, av := range items {
		row, _ := Decode(av) // a projection: only key, queue, group, seq and created_at are read
		outs[i].key = row.Key
		if row.Key == "" {
			outs[i].outcome = "changed" // not a row: nothing to index
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-work.Done():
			continue
		}
		wg.Go(func() {
			defer func() { <-sem }()
			if work.Err() != nil {
				return
			}
			err := b.index(ctx, row, now)
			var conflict *outbox.ConflictError
			switch {
			case err == nil:
				outs[i].outcome, outs[i].waited = "indexed", now.Sub(row.CreatedAt)
			case errors.Is(err, outbox.ErrDeadLettered):
				outs[i].outcome, outs[i].err = "dead-lettered", err
			case errors.As(err, &conflict):
				outs[i].outcome = "changed"
			case ctx.Err() != nil:
				// cut off: read again next run
			default:
				outs[i].outcome, outs[i].err = "error", err
			}
		})
	}
	wg.Wait()
	return outs
}

// index gives a missed row the shard a producer of this configuration
// writes (ShardFor), and a due time if it has none, while it still has no
// shard and is pending or claimed: it keeps its state, attempt and lease,
// so a claimed row whose claimer crashed is taken over once its lease
// lapses. One write: the table's, and the index entry's put.
func (b *Backstop) index(ctx context.Context, row outbox.Row, now time.Time) error {
	cond := expression.AttributeNotExists(expression.Name(AttrShard)).
		And(expression.Name(AttrStatus).In(expression.Value(outbox.StatusPending), expression.Value(outbox.StatusClaimed)))
	upd := expression.Set(expression.Name(AttrShard), expression.Value(ShardFor(row, b.cfg.Shards))).
		Set(expression.Name(AttrDueAt), expression.IfNotExists(expression.Name(AttrDueAt), expression.Value(now.UnixMilli())))
	const op = "backstop index"
	_, err := b.update(ctx, op, row.Key, cond, upd, types.ReturnValueNone)
	if isSizeError(err) {
		return b.failTooLarge(ctx, op, row.Key, cond, now, time.Time{}, err)
	}
	if msg, ok := refusal(err); ok {
		return b.failRefused(ctx, op, row.Key, cond, now, time.Time{}, outbox.TruncateError("backstop index refused: "+msg), "DynamoDB refuses the index write", err)
	}
	return err
}

// auditWork bounds a run's scans and writes to its time share of ctx.
func auditWork(ctx context.Context, share float64) (context.Context, context.CancelFunc) {
	d, ok := ctx.Deadline()
	if !ok || share <= 0 || share >= 1 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, time.Duration(float64(time.Until(d))*share))
}

// Backstopped returns what the backstop has found, from its item, with an
// eventually consistent read: all zero before its first run saved.
func (s *Store) Backstopped(ctx context.Context) (BackstopCounts, error) {
	st, err := s.loadBackstop(ctx, false)
	return st.BackstopCounts, err
}

// loadBackstop reads the backstop item.
func (s *Store) loadBackstop(ctx context.Context, consistent bool) (backstopState, error) {
	var st backstopState
	item, err := s.readStateItem(ctx, BackstopKey, "backstop", consistent)
	if err != nil {
		return st, err
	}
	num := func(name string) int64 { return stateNum(item, name) }
	if c, ok := item[attrBackstopCursor].(*types.AttributeValueMemberM); ok {
		st.cursor = c.Value
	}
	st.ThisPass, st.LastPass, st.Total = int(num(attrBackstopPass)), int(num(attrBackstopLastPass)), int(num(attrBackstopTotal))
	st.LongestWait = time.Duration(num(attrBackstopLongest)) * time.Millisecond
	st.PassStarted, st.LastPassStarted = fromMs(num(attrBackstopPassStart)), fromMs(num(attrBackstopLastPassStart))
	st.LastPassEnded, st.LeanAt = fromMs(num(attrBackstopLastPassEnd)), fromMs(num(attrBackstopLeanAt))
	st.version = num(attrStateVersion)
	return st, nil
}

// saveBackstop writes next as the backstop item, if it is still as st
// read it. When an overlapping run saved first, its place stands, and
// the rows this run indexed go into the total on their own, with the time
// lean was seen, as the audit's do.
func (s *Store) saveBackstop(ctx context.Context, st, next backstopState, found int) error {
	upd := expression.Set(expression.Name(attrBackstopPass), expression.Value(next.ThisPass)).
		Set(expression.Name(attrBackstopLastPass), expression.Value(next.LastPass)).
		Set(expression.Name(attrBackstopLongest), expression.Value(next.LongestWait.Milliseconds())).
		Add(expression.Name(attrBackstopTotal), expression.Value(found))
	for name, t := range map[string]time.Time{
		attrBackstopPassStart: next.PassStarted, attrBackstopLastPassStart: next.LastPassStarted,
		attrBackstopLastPassEnd: next.LastPassEnded, attrBackstopLeanAt: next.LeanAt,
	} {
		if t.IsZero() {
			upd = upd.Remove(expression.Name(name))
		} else {
			upd = upd.Set(expression.Name(name), expression.Value(t.UnixMilli()))
		}
	}
	if len(next.cursor) > 0 {
		upd = upd.Set(expression.Name(attrBackstopCursor), expression.Value(rawValue{&types.AttributeValueMemberM{Value: next.cursor}}))
	} else {
		upd = upd.Remove(expression.Name(attrBackstopCursor))
	}
	overtaken, err := s.saveStateItem(ctx, BackstopKey, "backstop", st.version, upd)
	if (overtaken || err != nil) && found > 0 {
		err = errors.Join(err, s.updateStateItem(ctx, BackstopKey, "backstop", expression.Add(expression.Name(attrBackstopTotal), expression.Value(found)).
			Set(expression.Name(attrBackstopLeanAt), expression.Value(next.LeanAt.UnixMilli()))))
	}
	return err
}
