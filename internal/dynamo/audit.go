package dynamo

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
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
	attrAuditVersion  = "version"
)

// Default audit budget: one page of 1,000 due-index entries per run.
const (
	DefaultAuditPages    = 1
	DefaultAuditPageSize = 1000
)

// AuditAPI is the DynamoDB client surface the audit needs.
type AuditAPI interface {
	API
	Scan(ctx context.Context, in *dynamodb.ScanInput, opts ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

// Audit finds and repairs stray rows in the due index, within a budget of
// Scan pages per run.
type Audit struct {
	*Store
	api AuditAPI
	// Pages is the most Scan requests one run makes, PageSize the most
	// entries each reads.
	Pages, PageSize int
}

// NewAudit returns an audit of the table cfg names with the default
// budget.
func NewAudit(api AuditAPI, cfg Config) (*Audit, error) {
	s, err := New(api, cfg)
	if err != nil {
		return nil, err
	}
	return &Audit{Store: s, api: api, Pages: DefaultAuditPages, PageSize: DefaultAuditPageSize}, nil
}

// Stray is one stray row an audit found and what it did with it.
type Stray struct {
	Key   string `json:"key"`
	Shard string `json:"shard"`
	// Outcome is "moved" (to the shard its key hashes to), "dead-lettered"
	// (the move would pass DynamoDB's limits), "changed" (the row moved
	// or left the index since the scan read it) or "error".
	Outcome string `json:"outcome"`
	// Error says why, when Outcome is "dead-lettered" or "error".
	Error string `json:"error,omitempty"`
}

// AuditResult is what one audit run did.
type AuditResult struct {
	// Pages counts the Scan requests made, Scanned the entries read.
	Pages, Scanned int
	// Found lists the stray rows found, in scan order.
	Found []Stray
	// Moved, DeadLettered and Errors count Found by outcome.
	Moved, DeadLettered, Errors int
	// PassDone reports that the run reached the end of the index: the next
	// run starts a new pass from the beginning.
	PassDone bool
}

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
// stopped: it moves each stray row to its key's shard, with a conditional
// write that holds only while the row's shard is still the one read, and
// saves its place and counts in the audit item. A healthy table costs no
// write to any row, and no write at all while the audit item's place and
// counts stay the same (an index the budget covers in one run). A run that
// another, concurrent, run overtook saves nothing: the rows it moved stay
// moved. The error is the first request that failed; what the run did
// before is returned and, but for a failed save, saved.
func (a *Audit) Run(ctx context.Context, now time.Time) (AuditResult, error) {
	var res AuditResult
	st, err := a.loadAudit(ctx, true)
	if err != nil {
		return res, err
	}
	cursor, pass := st.cursor, st.ThisPass
	lastPass := st.LastPass
	var scanErr error
	for range a.Pages {
		out, err := a.api.Scan(ctx, &dynamodb.ScanInput{
			TableName: aws.String(a.cfg.Table), IndexName: aws.String(DueIndex),
			Limit: aws.Int32(int32(a.PageSize)), ExclusiveStartKey: cursor,
			ProjectionExpression:     aws.String("#k, #s"),
			ExpressionAttributeNames: map[string]string{"#k": AttrKey, "#s": AttrShard},
		})
		if err != nil {
			scanErr = fmt.Errorf("audit scan of the due index: %w", err)
			break
		}
		res.Pages++
		res.Scanned += len(out.Items)
		for _, av := range out.Items {
			k, kok := av[AttrKey].(*types.AttributeValueMemberS)
			sh, sok := av[AttrShard].(*types.AttributeValueMemberS)
			if !kok || !sok || a.swept(sh.Value) {
				continue
			}
			stray := a.move(ctx, k.Value, sh.Value, now)
			res.Found = append(res.Found, stray)
			pass++
			switch stray.Outcome {
			case "moved":
				res.Moved++
			case "dead-lettered":
				res.DeadLettered++
			case "error":
				res.Errors++
			}
		}
		cursor = out.LastEvaluatedKey
		if len(cursor) == 0 {
			// A pass ends here; the next starts afresh in the next run,
			// so no run reads an entry twice.
			res.PassDone, lastPass, pass, cursor = true, pass, 0, nil
			break
		}
	}
	if maps.EqualFunc(cursor, st.cursor, sameValue) && pass == st.ThisPass && lastPass == st.LastPass && len(res.Found) == 0 {
		return res, scanErr
	}
	if err := a.saveAudit(ctx, st, cursor, pass, lastPass, len(res.Found)); err != nil {
		return res, errors.Join(scanErr, err)
	}
	return res, scanErr
}

// swept reports whether the sweep queries shard: a decimal number in
// [0, Shards) written as strconv.Itoa writes it, so not "04" or "+1".
func (a *Audit) swept(shard string) bool {
	n, err := strconv.Atoi(shard)
	return err == nil && n >= 0 && n < a.cfg.Shards && strconv.Itoa(n) == shard
}

// move rewrites a stray row's shard to the one its key hashes to, the
// shard a producer of this configuration writes. The row keeps its due
// time and state, and its place in an ordered group: the head check reads
// a predecessor by key, never by shard. A move DynamoDB refuses for good
// (the item would pass its size limit) dead-letters the row instead.
func (a *Audit) move(ctx context.Context, key, shard string, now time.Time) Stray {
	stray := Stray{Key: key, Shard: shard, Outcome: "moved"}
	const op = "move to its shard"
	still := func() expression.ConditionBuilder {
		return expression.Name(AttrShard).Equal(expression.Value(shard))
	}
	upd := expression.Set(expression.Name(AttrShard), expression.Value(ShardOf(key, a.cfg.Shards)))
	_, err := a.update(ctx, op, key, still(), upd, types.ReturnValueNone)
	if isSizeError(err) {
		err = a.failTooLarge(ctx, op, key, still(), now, err)
	} else if msg, ok := refusal(err); ok {
		err = a.failRefused(ctx, op, key, still(), now, outbox.TruncateError("move to its shard refused: "+msg),
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
		stray.Outcome, stray.Error = "error", err.Error()
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
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.cfg.Table), Key: keyOf(AuditKey), ConsistentRead: aws.Bool(consistent),
	})
	if err != nil {
		return st, fmt.Errorf("read the audit item: %w", err)
	}
	num := func(name string) int64 {
		if n, ok := out.Item[name].(*types.AttributeValueMemberN); ok {
			v, _ := strconv.ParseInt(n.Value, 10, 64)
			return v
		}
		return 0
	}
	if c, ok := out.Item[attrAuditCursor].(*types.AttributeValueMemberM); ok {
		st.cursor = c.Value
	}
	st.ThisPass, st.LastPass, st.Total = int(num(attrAuditPass)), int(num(attrAuditLastPass)), int(num(attrAuditTotal))
	st.version, st.Midway = num(attrAuditVersion), st.cursor != nil
	return st, nil
}

// saveAudit writes the audit item, if it is still as st read it.
func (s *Store) saveAudit(ctx context.Context, st auditState, cursor map[string]types.AttributeValue, pass, lastPass, found int) error {
	version := expression.Name(attrAuditVersion)
	cond := expression.AttributeNotExists(version)
	if st.version != 0 {
		cond = version.Equal(expression.Value(st.version))
	}
	upd := expression.Set(version, expression.Value(st.version+1)).
		Set(expression.Name(attrAuditPass), expression.Value(pass)).
		Set(expression.Name(attrAuditLastPass), expression.Value(lastPass)).
		Add(expression.Name(attrAuditTotal), expression.Value(found))
	if len(cursor) > 0 {
		upd = upd.Set(expression.Name(attrAuditCursor), expression.Value(rawValue{&types.AttributeValueMemberM{Value: cursor}}))
	} else {
		upd = upd.Remove(expression.Name(attrAuditCursor))
	}
	expr, err := expression.NewBuilder().WithCondition(cond).WithUpdate(upd).Build()
	if err != nil {
		return fmt.Errorf("build audit save: %w", err)
	}
	_, err = s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.cfg.Table), Key: keyOf(AuditKey),
		ConditionExpression: expr.Condition(), UpdateExpression: expr.Update(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return nil // a concurrent run saved first: its place stands
	}
	if err != nil {
		return fmt.Errorf("save the audit item: %w", err)
	}
	return nil
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
