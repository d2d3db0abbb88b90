package dynamo

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/outflowhq/outflow/internal/outbox"
)

// The sweep queries the due index shard by shard, "0" to Shards-1, so a
// row whose shard is anything else — written by a producer configured
// with more shards, or by hand as "x", "-1" or "04" — is never swept. The
// audit finds such stray rows by scanning the due index a page at a time,
// resuming where the last run stopped, and moves each to the shard its key
// hashes to, where the sweep takes it.

// AuditKey is the key of the item that holds the audit's place in the due
// index and what it found. It is no row: it has no status and no index
// keys, so no sweep, wake, dead-letter listing or stats count reads it as
// one. No row has this key: a row key holds no space (GroupKey relies on
// the same rule).
const AuditKey = "audit due"

// Attributes of the audit item.
const (
	attrAuditCursor   = "cursor"
	attrAuditPass     = "pass_stray"
	attrAuditLastPass = "last_pass_stray"
	attrAuditTotal    = "stray_total"
)

// Default audit budget: one page of 1,000 due-index entries per run, moves
// for at most a quarter of the time the run is given, eight at a time.
const (
	DefaultAuditPages     = 1
	DefaultAuditPageSize  = 1000
	DefaultAuditTimeShare = 0.25
	auditMovers           = 8
)

// Past every entry of a shard in the due index: the largest number
// DynamoDB holds sorts after any due time, and a key of the highest code
// point after any key with that due time.
const (
	maxDueAt = "9.9999999999999999999999999999999999999E+125"
	maxKey   = "\U0010FFFF\U0010FFFF\U0010FFFF\U0010FFFF"
)

// AuditAPI is the DynamoDB client surface the audit needs.
type AuditAPI interface {
	API
	Scan(ctx context.Context, in *dynamodb.ScanInput, opts ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

// Audit finds and repairs stray rows in the due index, within a budget of
// Scan pages and of time per run.
type Audit struct {
	*Store
	api AuditAPI
	// Pages is the most Scan requests one run makes, PageSize the most
	// entries each reads.
	Pages, PageSize int
	// TimeShare is the fraction of the time left before the context's
	// deadline that a run may spend scanning and moving; it saves its
	// place in the rest. The caller passes a context whose deadline
	// leaves its own margin (the sweep's), so the audit never takes the
	// time a sweep of the same invocation needs. Zero, one or more, or a
	// context without a deadline, bound the run by the context alone.
	TimeShare float64
}

// NewAudit returns an audit of the table cfg names with the default
// budget.
func NewAudit(api AuditAPI, cfg Config) (*Audit, error) {
	s, err := New(api, cfg)
	if err != nil {
		return nil, err
	}
	return &Audit{Store: s, api: api, Pages: DefaultAuditPages, PageSize: DefaultAuditPageSize, TimeShare: DefaultAuditTimeShare}, nil
}

// Stray is one stray row an audit found and what it did with it.
type Stray struct {
	Key   string `json:"key"`
	Shard string `json:"shard"`
	// Outcome is "moved" (to its own shard, ShardFor), "dead-lettered"
	// (the move would pass DynamoDB's limits) or "error" (the move failed:
	// a later run reads the row again).
	Outcome string `json:"outcome"`
	// Error says why, when Outcome is "dead-lettered" or "error".
	Error string `json:"error,omitempty"`
	// err is the failed move's error, for Run to return wrapped.
	err error
}

// AuditResult is what one audit run did.
type AuditResult struct {
	// Pages counts the Scan requests made, Scanned the entries read.
	Pages, Scanned int
	// Found lists the stray rows this run moved, dead-lettered or failed
	// to move, in scan order. A row another writer changed between the
	// scan and the move (an overlapping audit that moved it first) is not
	// in it: that writer counts it.
	Found []Stray
	// Moved, DeadLettered and Errors count Found by outcome; Changed
	// counts the rows left out of it because they changed.
	Moved, DeadLettered, Errors, Changed int
	// PassDone reports that the run reached the end of the index: the next
	// run starts a new pass from the beginning.
	PassDone bool
}

// Strays is the number of stray rows this run resolved: moved or
// dead-lettered. It is what the StrayRows metric and the audit's counts
// add up; a row whose move failed counts when a later run resolves it.
func (r AuditResult) Strays() int { return r.Moved + r.DeadLettered }

// AuditCounts is what the audit has found, as its item holds it.
type AuditCounts struct {
	// LastPass counts the stray rows the last complete pass over the due
	// index found; ThisPass those the pass under way has found so far.
	LastPass int `json:"last_pass"`
	ThisPass int `json:"this_pass"`
	// Total counts every stray row any audit run found.
	Total int `json:"total"`
	// Midway reports that a pass is under way: the next run resumes it.
	Midway bool `json:"midway"`
}

// auditState is the audit item as read.
type auditState struct {
	AuditCounts
	cursor  map[string]types.AttributeValue
	version int64
}

// Run audits the next pages of the due index, from where the last run
// stopped: it moves each stray row to its own shard, with a conditional
// write that holds only while the row's shard is still the one read, and
// saves its place and counts in the audit item. A healthy table costs no
// write to any row, and no write at all while the audit item's place and
// counts stay the same (an index the budget covers in one run).
//
// The saved place never passes an entry whose move failed or was cut off
// by the time share, so the next run reads it again; a page that ends
// inside a swept shard skips the rest of that shard, whose entries are
// never stray, so rows staged into a busy shard never hold the pass. A
// run that another, concurrent, run overtook saves only its total: the
// rows it moved stay moved. The error joins every request that failed;
// what the run did is returned and, but for a failed save, saved.
func (a *Audit) Run(ctx context.Context, now time.Time) (AuditResult, error) {
	var res AuditResult
	st, err := a.loadAudit(ctx, true)
	if err != nil {
		return res, err
	}
	work, cancel := a.workContext(ctx)
	defer cancel()
	cursor, pass := st.cursor, st.ThisPass
	lastPass := st.LastPass
	var errs []error
	for range a.Pages {
		if work.Err() != nil {
			break
		}
		out, err := a.api.Scan(work, &dynamodb.ScanInput{
			TableName: aws.String(a.cfg.Table), IndexName: aws.String(DueIndex),
			Limit: aws.Int32(int32(a.PageSize)), ExclusiveStartKey: cursor,
			ProjectionExpression:     aws.String("#k, #s, #d"),
			ExpressionAttributeNames: map[string]string{"#k": AttrKey, "#s": AttrShard, "#d": AttrDueAt},
		})
		if err != nil {
			if work.Err() == nil {
				errs = append(errs, fmt.Errorf("audit scan of the due index: %w", err))
			}
			break
		}
		res.Pages++
		res.Scanned += len(out.Items)
		strays := a.moveAll(ctx, work, out.Items, now)
		// The place moves on past each entry in scan order until the first
		// whose move did not finish well; the outcomes after it still count.
		stop := -1
		for i, stray := range strays {
			switch {
			case stray == nil:
				continue
			case stray.Outcome == "":
				// Not begun before the time share ended, or cut off by
				// the run's context: the next run reads it again.
			case stray.Outcome == "changed":
				res.Changed++
			default:
				res.Found = append(res.Found, *stray)
				switch stray.Outcome {
				case "moved":
					res.Moved++
				case "dead-lettered":
					res.DeadLettered++
				case "error":
					res.Errors++
					errs = append(errs, fmt.Errorf("audit move of %q: %w", stray.Key, stray.err))
				}
			}
			if stop < 0 && (stray.Outcome == "" || stray.Outcome == "error") {
				stop = i
			}
		}
		if stop >= 0 {
			if stop > 0 {
				cursor = indexKey(out.Items[stop-1])
			}
			break
		}
		cursor = a.skipSwept(out.LastEvaluatedKey)
		if len(cursor) == 0 {
			// A pass ends here; the next starts afresh in the next run,
			// so no run reads an entry twice.
			pass += res.Strays()
			res.PassDone, lastPass, pass, cursor = true, pass, 0, nil
			break
		}
	}
	if !res.PassDone {
		pass += res.Strays()
	}
	if maps.EqualFunc(cursor, st.cursor, sameValue) && pass == st.ThisPass && lastPass == st.LastPass && res.Strays() == 0 {
		return res, errors.Join(errs...)
	}
	if err := a.saveAudit(ctx, st, cursor, pass, lastPass, res.Strays()); err != nil {
		errs = append(errs, err)
	}
	return res, errors.Join(errs...)
}

// workContext bounds the run's scans and moves to its time share of ctx.
func (a *Audit) workContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return auditWork(ctx, a.TimeShare)
}

// moveAll moves the stray rows among a page's entries, auditMovers at a
// time, and returns each entry's outcome: nil for an entry on a swept
// shard, an empty Outcome for a move never begun or cut off. A move begins
// only while work lasts, and runs with ctx: one cut off mid-request might
// be applied yet go uncounted, so the moves under way when the time share
// ends finish (at most auditMovers requests past it).
func (a *Audit) moveAll(ctx, work context.Context, items []map[string]types.AttributeValue, now time.Time) []*Stray {
	strays := make([]*Stray, len(items))
	sem := make(chan struct{}, auditMovers)
	var wg sync.WaitGroup
	for i, av := range items {
		k, kok := av[AttrKey].(*types.AttributeValueMemberS)
		sh, sok := av[AttrShard].(*types.AttributeValueMemberS)
		if !kok || !sok || a.swept(sh.Value) {
			continue
		}
		strays[i] = &Stray{Key: k.Value, Shard: sh.Value}
		select {
		case sem <- struct{}{}:
		case <-work.Done():
			continue
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if work.Err() != nil {
				return
			}
			stray := a.move(ctx, k.Value, sh.Value, now)
			if stray.Outcome == "error" && ctx.Err() != nil {
				return // cut off: not an error, and read again next run
			}
			*strays[i] = stray
		}()
	}
	wg.Wait()
	return strays
}

// indexKey is the due-index key of a scanned entry: a Scan cursor that
// resumes just after it.
func indexKey(item map[string]types.AttributeValue) map[string]types.AttributeValue {
	key := map[string]types.AttributeValue{}
	for _, name := range []string{AttrKey, AttrShard, AttrDueAt} {
		if v, ok := item[name]; ok {
			key[name] = v
		}
	}
	return key
}

// skipSwept returns a Scan cursor past every entry of the shard cursor
// points into when the sweep queries that shard: none of its entries can
// be stray, and rows staged into it after the cursor would otherwise keep
// a busy shard's page filled and the pass from ever reaching the next
// shard. A cursor in a stray shard stays: each page there moves what it
// reads.
func (a *Audit) skipSwept(cursor map[string]types.AttributeValue) map[string]types.AttributeValue {
	sh, ok := cursor[AttrShard].(*types.AttributeValueMemberS)
	if !ok || !a.swept(sh.Value) {
		return cursor
	}
	return map[string]types.AttributeValue{
		AttrShard: sh, AttrDueAt: &types.AttributeValueMemberN{Value: maxDueAt},
		AttrKey: &types.AttributeValueMemberS{Value: maxKey},
	}
}

// swept reports whether the sweep queries shard: a decimal number in
// [0, Shards) written as strconv.Itoa writes it, so not "04" or "+1".
func (a *Audit) swept(shard string) bool {
	n, err := strconv.Atoi(shard)
	return err == nil && n >= 0 && n < a.cfg.Shards && strconv.Itoa(n) == shard
}

// move rewrites a stray row's shard to its own (ShardFor: its key's, or
// its ordered group's), the shard a producer of this configuration writes. The row keeps its due
// time and state, and its place in an ordered group: the head check reads
// a predecessor by key, never by shard. A move DynamoDB refuses for good
// (the item would pass its size limit) dead-letters the row instead; a
// row another writer changed since the scan is left alone, "changed".
func (a *Audit) move(ctx context.Context, key, shard string, now time.Time) Stray {
	stray := Stray{Key: key, Shard: shard, Outcome: "moved"}
	const op = "move to its shard"
	still := func() expression.ConditionBuilder {
		return expression.Name(AttrShard).Equal(expression.Value(shard))
	}
	err := a.placing(ctx, op, key, still, func(to string) expression.UpdateBuilder {
		return expression.Set(expression.Name(AttrShard), expression.Value(to))
	})
	if isSizeError(err) {
		err = a.failTooLarge(ctx, op, key, still(), now, time.Time{}, err)
	} else if msg, ok := refusal(err); ok {
		err = a.failRefused(ctx, op, key, still(), now, time.Time{}, outbox.TruncateError("move to its shard refused: "+msg),
			"DynamoDB refuses the move", err)
	}
	var conflict *outbox.ConflictError
	switch {
	case err == nil:
	case errors.Is(err, outbox.ErrDeadLettered):
		stray.Outcome, stray.Error = "dead-lettered", err.Error()
	case errors.As(err, &conflict):
		stray.Outcome = "changed"
	default:
		stray.Outcome, stray.Error, stray.err = "error", err.Error(), err
	}
	return stray
}

// Audited returns what the audit has found, from its item, with an
// eventually consistent read: all zero before the first audit run saved.
func (s *Store) Audited(ctx context.Context) (AuditCounts, error) {
	st, err := s.loadAudit(ctx, false)
	return st.AuditCounts, err
}

// loadAudit reads the audit item.
func (s *Store) loadAudit(ctx context.Context, consistent bool) (auditState, error) {
	var st auditState
	item, err := s.readStateItem(ctx, AuditKey, "audit", consistent)
	if err != nil {
		return st, err
	}
	if c, ok := item[attrAuditCursor].(*types.AttributeValueMemberM); ok {
		st.cursor = c.Value
	}
	st.ThisPass, st.LastPass, st.Total = int(stateNum(item, attrAuditPass)), int(stateNum(item, attrAuditLastPass)), int(stateNum(item, attrAuditTotal))
	st.version, st.Midway = stateNum(item, attrStateVersion), st.cursor != nil
	return st, nil
}

// saveAudit writes the audit item, if it is still as st read it. The
// rows are moved whether or not the save holds, and no later run finds
// them again: when it does not, their total goes in on its own,
// unconditionally (after a save that timed out but was applied, twice;
// never dropped).
func (s *Store) saveAudit(ctx context.Context, st auditState, cursor map[string]types.AttributeValue, pass, lastPass, found int) error {
	upd := expression.Set(expression.Name(attrAuditPass), expression.Value(pass)).
		Set(expression.Name(attrAuditLastPass), expression.Value(lastPass)).
		Add(expression.Name(attrAuditTotal), expression.Value(found))
	if len(cursor) > 0 {
		upd = upd.Set(expression.Name(attrAuditCursor), expression.Value(rawValue{&types.AttributeValueMemberM{Value: cursor}}))
	} else {
		upd = upd.Remove(expression.Name(attrAuditCursor))
	}
	overtaken, err := s.saveStateItem(ctx, AuditKey, "audit", st.version, upd)
	if (overtaken || err != nil) && found > 0 {
		err = errors.Join(err, s.updateStateItem(ctx, AuditKey, "audit", expression.Add(expression.Name(attrAuditTotal), expression.Value(found))))
	}
	return err
}

// rawValue is an attribute value the expression builder stores as it is.
type rawValue struct{ av types.AttributeValue }

// MarshalDynamoDBAttributeValue returns the value itself.
func (r rawValue) MarshalDynamoDBAttributeValue() (types.AttributeValue, error) { return r.av, nil }

// sameValue compares two key attribute values of a scan cursor.
func sameValue(a, b types.AttributeValue) bool {
	switch x := a.(type) {
	case *types.AttributeValueMemberS:
		y, ok := b.(*types.AttributeValueMemberS)
		return ok && x.Value == y.Value
	case *types.AttributeValueMemberN:
		y, ok := b.(*types.AttributeValueMemberN)
		return ok && x.Value == y.Value
	}
	return false
}
