package dynamo

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/outflowhq/outflow/internal/outbox"
)

// API is the part of the DynamoDB client the store uses: staging's, and
// the dispatcher's updates, deletes and queries.
type API interface {
	StageAPI
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

// DefaultDoneRetention is how long the dispatcher keeps a delivered row
// as done by default (OUTFLOW_DONE_RETENTION): the window in which a
// producer's retry of a key already delivered is recognised as staged,
// not staged again. Keeping the row costs no write a delete would not:
// both write the item once and remove its due-index entry, and the TTL's
// delete is free.
const DefaultDoneRetention = 24 * time.Hour

// Config says which table the store uses and how.
type Config struct {
	// Table is the table name.
	Table string
	// Shards is the number of due-index partitions; it may grow, never
	// shrink.
	Shards int
	// DoneRetention keeps delivered rows as status done for this long
	// (the dispatcher's default is DefaultDoneRetention),
	// expired by TTL; zero deletes them on delivery (the cheapest choice).
	DoneRetention time.Duration
}

// Store is the outbox store on one DynamoDB table. It implements
// outbox.Store.
type Store struct {
	api API
	cfg Config
}

var _ outbox.Store = (*Store)(nil)

// Validate reports every setting that is out of range, as
// *outbox.FieldError values joined into one error.
func (c Config) Validate() error {
	var errs []error
	if c.Table == "" {
		errs = append(errs, &outbox.FieldError{Field: "Table", Value: `""`, Msg: "must not be empty"})
	}
	if c.Shards < 1 || c.Shards > 1000 {
		errs = append(errs, &outbox.FieldError{Field: "Shards", Value: c.Shards, Msg: "must be in [1, 1000]"})
	}
	if c.DoneRetention < 0 {
		errs = append(errs, &outbox.FieldError{Field: "DoneRetention", Value: c.DoneRetention, Msg: "must not be negative"})
	}
	return errors.Join(errs...)
}

// New returns a store over the table cfg names.
func New(api API, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid store config: %w", err)
	}
	// Throttles reach the engine as its own signal (see throttleAware).
	return &Store{api: throttleAware{api}, cfg: cfg}, nil
}

// Shards implements outbox.Store.
func (s *Store) Shards() int { return s.cfg.Shards }

// Table is the table name.
func (s *Store) Table() string { return s.cfg.Table }

// Stage writes a new pending row, due at its NotBefore or now, whichever is
// later. A row with the same key already present gives a
// *outbox.ConflictError holding it — unless it is this very write, found by
// the SDK's retry of a put whose answer was lost, which is success.
func (s *Store) Stage(ctx context.Context, row outbox.Row, now time.Time) error {
	in, err := s.StageInput(row, now)
	if err != nil {
		return err
	}
	in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	_, err = s.api.PutItem(ctx, in)
	err = s.wrap("stage", row.Key, err)
	var conflict *outbox.ConflictError
	if errors.As(err, &conflict) && conflict.Current != nil && conflict.Current.Status == outbox.StatusPending &&
		conflict.Current.Attempt == 0 && conflict.Current.CreatedAt.Equal(time.UnixMilli(now.UnixMilli())) &&
		SameContent(*conflict.Current, row) {
		return nil
	}
	return err
}

// StageInput is the conditional put that stages row, for callers that add
// it to their own transaction.
func (s *Store) StageInput(row outbox.Row, now time.Time) (*dynamodb.PutItemInput, error) {
	if IsReservedKey(row.Key) {
		return nil, fmt.Errorf("row key %q is reserved: it names the dispatcher's configuration, the audit's item or an ordered group's item", row.Key)
	}
	row.Status, row.Attempt, row.CreatedAt = outbox.StatusPending, 0, now
	row.DueAt = now
	if row.NotBefore.After(now) {
		row.DueAt = row.NotBefore
	}
	row.Token, row.LeaseUntil, row.FailedAt, row.UnsureAt, row.Errors, row.LastError = "", time.Time{}, time.Time{}, time.Time{}, nil, ""
	row.StageID = rand.Text()[:16] // 80 random bits: see AttrStageID
	av, err := Encode(row, s.cfg.Shards)
	if err != nil {
		return nil, err
	}
	if err := checkSize(row.Key, row.Queue, av); err != nil {
		return nil, err
	}
	expr, err := expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name(AttrKey))).Build()
	if err != nil {
		return nil, fmt.Errorf("build stage condition: %w", err)
	}
	return &dynamodb.PutItemInput{
		TableName:                aws.String(s.cfg.Table),
		Item:                     av,
		ConditionExpression:      expr.Condition(),
		ExpressionAttributeNames: expr.Names(),
	}, nil
}

// Get reads one row with a strongly consistent read. A missing row gives a
// nil row and no error; an unreadable one its decode error and what could
// be read.
func (s *Store) Get(ctx context.Context, key string) (*outbox.Row, error) {
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.cfg.Table),
		Key:            keyOf(key),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	if len(out.Item) == 0 {
		return nil, nil
	}
	row, err := Decode(out.Item)
	return &row, err
}

// QueryDue implements outbox.Store.
func (s *Store) QueryDue(ctx context.Context, shard int, now time.Time, after *outbox.DueRef, limit int) ([]outbox.DueRef, bool, error) {
	shardKey := strconv.Itoa(shard)
	kc := expression.Key(AttrShard).Equal(expression.Value(shardKey)).
		And(expression.Key(AttrDueAt).LessThanEqual(expression.Value(now.UnixMilli())))
	expr, err := expression.NewBuilder().WithKeyCondition(kc).Build()
	if err != nil {
		return nil, false, fmt.Errorf("build due query: %w", err)
	}
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(s.cfg.Table),
		IndexName:                 aws.String(DueIndex),
		KeyConditionExpression:    expr.KeyCondition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
		Limit:                     aws.Int32(int32(limit)),
	}
	if after != nil {
		if start, ok := after.Cursor.(map[string]types.AttributeValue); ok {
			in.ExclusiveStartKey = start // as DynamoDB returned it
		} else {
			in.ExclusiveStartKey = map[string]types.AttributeValue{
				AttrKey:   &types.AttributeValueMemberS{Value: after.Key},
				AttrShard: &types.AttributeValueMemberS{Value: shardKey},
				AttrDueAt: &types.AttributeValueMemberN{Value: strconv.FormatInt(after.DueAt.UnixMilli(), 10)},
			}
		}
	}
	out, err := s.api.Query(ctx, in)
	if err != nil {
		return nil, false, fmt.Errorf("query shard %d: %w", shard, err)
	}
	refs := make([]outbox.DueRef, 0, len(out.Items))
	for _, av := range out.Items {
		refs = append(refs, dueRef(av, shard))
	}
	if len(refs) > 0 && len(out.LastEvaluatedKey) > 0 {
		refs[len(refs)-1].Cursor = out.LastEvaluatedKey
	}
	return refs, len(out.LastEvaluatedKey) > 0, nil
}

// dueRef reads one due-index entry. Each attribute is read on its own: the
// keys are typed by DynamoDB itself and always read, while created_at may
// be anything a producer wrote, and if it is not a whole number the row is
// simply not left to the wake.
func dueRef(av map[string]types.AttributeValue, shard int) outbox.DueRef {
	ref := outbox.DueRef{Shard: shard}
	if k, ok := av[AttrKey].(*types.AttributeValueMemberS); ok {
		ref.Key = k.Value
	}
	if d, ok := av[AttrDueAt].(*types.AttributeValueMemberN); ok {
		// Not fromMs: a due_at of 0 is 1970, not "no time".
		ref.DueAt = time.UnixMilli(clampMs(d.Value))
	}
	if q, ok := av[AttrQueue].(*types.AttributeValueMemberS); ok {
		ref.Queue = q.Value
	}
	if ms, ok := wholeNumber(av, AttrCreatedAt); ok {
		ref.CreatedAt = fromMs(ms)
	}
	// The index projects the row's place in its ordered group, so the
	// head check need not read the row; one it cannot read, it reads.
	if prev, seq, malformed := readLink(av); malformed == "" {
		ref.Prev, ref.Seq, ref.Linked = prev, seq, true
	}
	return ref
}

// Claim implements outbox.Store.
func (s *Store) Claim(ctx context.Context, key string, now time.Time, lease time.Duration, maxAttempts int) (outbox.Row, error) {
	nowMs := now.UnixMilli()
	claimable := expression.Name(AttrStatus).Equal(expression.Value(outbox.StatusPending)).Or(lapsedLease(nowMs))
	// The malformed definition comes first: a malformed item is never
	// claimed (it is quarantined), and its type checks make a foreign item
	// with, say, a non-numeric attempt or lease fail the condition cleanly
	// (moto errors on a comparison of mismatched types).
	cond := func(state expression.ConditionBuilder) expression.ConditionBuilder {
		return validState(now).
			And(expression.Name(AttrDueAt).LessThanEqual(expression.Value(nowMs))).
			And(expression.Name(AttrAttempt).LessThan(expression.Value(maxAttempts))).
			And(state)
	}
	token := rand.Text()
	upd := func() expression.UpdateBuilder {
		return expression.Set(expression.Name(AttrStatus), expression.Value(outbox.StatusClaimed)).
			Set(expression.Name(AttrToken), expression.Value(token)).
			Set(expression.Name(AttrLeaseUntil), expression.Value(now.Add(lease).UnixMilli())).
			Set(expression.Name(AttrClaimedAt), expression.Value(nowMs)).
			Set(expression.Name(AttrAttempt), expression.Name(AttrAttempt).Plus(expression.Value(1)))
	}
	out, err := s.claimUpdate(ctx, key, token, cond(expression.Name(AttrStatus).Equal(expression.Value(outbox.StatusPending))), upd())
	var lapsed *outbox.ConflictError
	if errors.As(err, &lapsed) && lapsed.Malformed == "" && lapsed.Current != nil && lapsed.Current.Status == outbox.StatusClaimed &&
		lapsed.Current.LeaseUntil.Before(now) {
		// Another claim lapsed: its holder may have sent the row up to its
		// lease's end, with no answer recorded. The claim that takes over
		// says so (UnsureAt), at the price of the refused write above,
		// which only a lapsed claim costs.
		out, err = s.claimUpdate(ctx, key, token, cond(lapsedLease(nowMs)), withUnsureAt(upd(), now))
	}
	if isSizeError(err) {
		// The item cannot take even the claim: it can never be delivered.
		claimable := expression.Name(AttrDueAt).LessThanEqual(expression.Value(nowMs)).And(claimable)
		return outbox.Row{}, s.failTooLarge(ctx, "claim", key, claimable, now, time.Time{}, err)
	}
	if msg, ok := refusal(err); ok {
		// DynamoDB refuses this claim for good (say, attempt + 1 needs
		// more than 38 digits): retrying it every sweep would hold the
		// row for ever, so it is dead-lettered with DynamoDB's reason.
		claimable := expression.Name(AttrDueAt).LessThanEqual(expression.Value(nowMs)).And(claimable)
		return outbox.Row{}, s.failRefused(ctx, "claim", key, claimable, now, time.Time{}, outbox.TruncateError("claim refused: "+msg),
			"DynamoDB refuses the claim", err)
	}
	var conflict *outbox.ConflictError
	if errors.As(err, &conflict) && conflict.Malformed == "" && conflict.Current != nil {
		// Rule 5 of the malformed definition needs the clock, which the
		// conflict's decoding did not have.
		if lerr := leaseRule(conflict.Current.Status, ms(conflict.Current.LeaseUntil), now); lerr != nil {
			conflict.Malformed, conflict.Current = lerr.Error(), nil
		}
	}
	if err != nil {
		return outbox.Row{}, err
	}
	row, derr := Decode(out.Attributes)
	if derr == nil {
		// Another producer's item may leave no room for the history and
		// dead-letter keys; refuse it now, with the reason, rather than
		// fail on size after it was sent.
		derr = checkSize(key, row.Queue, out.Attributes)
	}
	if derr != nil {
		// The claim condition held, so the state fields are sound; keep
		// the claim so the engine can dead-letter the row with the reason.
		row.Key, row.Status, row.Token, row.Malformed = key, outbox.StatusClaimed, token, derr.Error()
	}
	return row, nil
}

// holds is the condition every settle needs: the caller's claim is
// current, or, for a row sent unclaimed, the row is still as staged.
func holds(row outbox.Row) expression.ConditionBuilder {
	if row.Unclaimed {
		return asStaged(row)
	}
	return expression.Name(AttrToken).Equal(expression.Value(row.Token)).
		And(expression.Name(AttrStatus).Equal(expression.Value(outbox.StatusClaimed)))
}

// asStaged holds while no one but a producer's put has written the row the
// wake sent unclaimed: pending at attempt 0 (Retry and DeadLetter of an
// unclaimed row set attempt 1), with the stage_id, created_at and due_at
// of the stream image the wake sent (a row staged again under the key has
// another stage_id, even in the same millisecond; a redrive moves
// due_at), and no claimed_at or
// redriven_at, which a claim and a redrive set and nothing removes but a
// dead-lettering, after which the row is failed. So the write fails if a
// sweep claimed the row since, even one that released it or whose claim
// lapsed, and cannot settle a newer attempt than the one the wake made.
func asStaged(row outbox.Row) expression.ConditionBuilder {
	return expression.Name(AttrStatus).Equal(expression.Value(outbox.StatusPending)).
		And(expression.Name(AttrStageID).Equal(expression.Value(row.StageID))).
		And(expression.Name(AttrAttempt).Equal(expression.Value(0))).
		And(expression.Name(AttrCreatedAt).Equal(expression.Value(row.CreatedAt.UnixMilli()))).
		And(expression.Name(AttrDueAt).Equal(expression.Value(row.DueAt.UnixMilli()))).
		And(expression.AttributeNotExists(expression.Name(AttrClaimedAt))).
		And(expression.AttributeNotExists(expression.Name(AttrRedrivenAt))).
		And(expression.AttributeNotExists(expression.Name(AttrToken)))
}

// withAttempt stores the attempt of a row sent unclaimed, which no claim
// counted: a failed send still spends its budget.
func withAttempt(upd expression.UpdateBuilder, row outbox.Row) expression.UpdateBuilder {
	if !row.Unclaimed {
		return upd
	}
	return upd.Set(expression.Name(AttrAttempt), expression.Value(row.Attempt))
}

// Done implements outbox.Store: it deletes the row, or keeps it as done
// until the retention TTL when one is configured, without its payload and
// attributes (tombstone).
func (s *Store) Done(ctx context.Context, row outbox.Row, now time.Time) error {
	if s.cfg.DoneRetention == 0 {
		expr, err := expression.NewBuilder().WithCondition(holds(row)).Build()
		if err != nil {
			return fmt.Errorf("build done condition: %w", err)
		}
		_, err = s.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{
			TableName:                           aws.String(s.cfg.Table),
			Key:                                 keyOf(row.Key),
			ConditionExpression:                 expr.Condition(),
			ExpressionAttributeNames:            expr.Names(),
			ExpressionAttributeValues:           expr.Values(),
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		return s.wrap("done", row.Key, err)
	}
	upd := expression.Set(expression.Name(AttrStatus), expression.Value(outbox.StatusDone)).
		Set(expression.Name(AttrDoneAt), expression.Value(now.UnixMilli())).
		Set(expression.Name(AttrExpiresAt), expression.Value(now.Add(s.cfg.DoneRetention).Unix())).
		Remove(expression.Name(AttrShard)).Remove(expression.Name(AttrDueAt)).
		Remove(expression.Name(AttrToken)).Remove(expression.Name(AttrLeaseUntil))
	upd = tombstone(upd, row)
	_, err := s.update(ctx, "done", row.Key, holds(row), upd, types.ReturnValueNone)
	return err
}

// tombstone makes the settle to done drop what only a delivery needs:
// the row's payload and attributes, kept as their digest (ContentDigest),
// by which a producer's retry of the key is still told from other
// content. A row given without its payload (one the store could not read
// whole is never settled done; this is a guard) keeps what it has. The
// update costs what it did: DynamoDB bills it on the larger of the item
// before and after.
func tombstone(upd expression.UpdateBuilder, row outbox.Row) expression.UpdateBuilder {
	if row.Payload == nil {
		return upd
	}
	return upd.Set(expression.Name(AttrContent), expression.Value(ContentDigest(row))).
		Remove(expression.Name(AttrPayload)).Remove(expression.Name(AttrAttributes))
}

// Retry implements outbox.Store. Moving due_at moves the row within the due
// index, which is the only index write a retry costs.
func (s *Store) Retry(ctx context.Context, row outbox.Row, dueAt time.Time, history []outbox.AttemptError) error {
	upd := withHistory(expression.Set(expression.Name(AttrStatus), expression.Value(outbox.StatusPending)), history).
		Set(expression.Name(AttrDueAt), expression.Value(dueAt.UnixMilli())).
		Set(expression.Name(AttrShard), s.shardIfMissing(row)).
		Remove(expression.Name(AttrToken)).Remove(expression.Name(AttrLeaseUntil))
	upd = withAttempt(withUnsureAt(upd, row.UnsureAt), row)
	_, err := s.update(ctx, "retry", row.Key, holds(row), upd, types.ReturnValueNone)
	if isSizeError(err) {
		now := time.Now()
		if len(history) > 0 {
			now = history[len(history)-1].At
		}
		return s.failTooLarge(ctx, "retry", row.Key, holds(row), now, row.UnsureAt, err)
	}
	return err
}

// Close implements outbox.Store: a retry that marks the row closed and
// gives it a fresh budget, for the message that closes its place. A row
// given as failed (outbox.StatusFailed) is a dead letter no message closed
// (outbox.Link.Unclosed): it moves from the dead index back to the due
// index under the condition that it is still failed and still not closed,
// its history kept (history is nil). Its successor follows the closing
// message; DeadLetter then makes it the dead letter it was.
func (s *Store) Close(ctx context.Context, row outbox.Row, dueAt time.Time, history []outbox.AttemptError) error {
	cond := holds(row)
	if row.Status == outbox.StatusFailed {
		cond = expression.Name(AttrStatus).Equal(expression.Value(outbox.StatusFailed)).
			And(expression.AttributeNotExists(expression.Name(AttrClosed)))
	}
	upd := withHistory(expression.Set(expression.Name(AttrStatus), expression.Value(outbox.StatusPending)), history).
		Set(expression.Name(AttrDueAt), expression.Value(dueAt.UnixMilli())).
		Set(expression.Name(AttrShard), s.shardIfMissing(row)).
		Set(expression.Name(AttrAttempt), expression.Value(0)).
		Set(expression.Name(AttrClosed), expression.Value(outbox.ClosedDeadLetter)).
		Remove(expression.Name(AttrToken)).Remove(expression.Name(AttrLeaseUntil))
	if row.Status == outbox.StatusFailed {
		upd = upd.Remove(expression.Name(AttrFailedAt)).Remove(expression.Name(AttrDeadQueue))
	}
	upd = withUnsureAt(upd, row.UnsureAt)
	_, err := s.update(ctx, "close", row.Key, cond, upd, types.ReturnValueNone)
	if isSizeError(err) {
		if row.Status == outbox.StatusFailed {
			// It is a dead letter already: it stays one, as it was.
			return fmt.Errorf("%w: %s: the close would pass DynamoDB's item size limit: %w", outbox.ErrDeadLettered, row.Key, err)
		}
		now := time.Now()
		if len(history) > 0 {
			now = history[len(history)-1].At
		}
		return s.failTooLarge(ctx, "close", row.Key, holds(row), now, row.UnsureAt, err)
	}
	return err
}

// DeadLetter implements outbox.Store.
func (s *Store) DeadLetter(ctx context.Context, row outbox.Row, now time.Time, history []outbox.AttemptError) error {
	err := s.keepingHistory(ctx, "dead-letter", row.Key, holds(row), func() expression.UpdateBuilder {
		upd := withAttempt(failUpdate(row.Queue, now, row.UnsureAt, history), row)
		if row.Closed != "" {
			// Closed (its message sent), or its place open (PlaceOpen).
			upd = upd.Set(expression.Name(AttrClosed), expression.Value(row.Closed))
		}
		return upd
	})
	if isSizeError(err) {
		return s.failTooLarge(ctx, "dead-letter", row.Key, holds(row), now, row.UnsureAt, err)
	}
	return err
}

// Expire implements outbox.Store.
func (s *Store) Expire(ctx context.Context, row outbox.Row, now time.Time, maxAttempts int, history []outbox.AttemptError) error {
	nowMs := now.UnixMilli()
	lapsed := lapsedLease(nowMs)
	stranded := expression.Name(AttrStatus).Equal(expression.Value(outbox.StatusPending)).
		And(expression.Name(AttrDueAt).LessThanEqual(expression.Value(nowMs)))
	cond := expression.Name(AttrAttempt).GreaterThanEqual(expression.Value(maxAttempts)).And(lapsed.Or(stranded))
	// A closing message whose claim lapsed may or may not have gone: the
	// place counts as open (outbox.ClosedUnsure), and holds its group
	// until a purge (which sends the closing message again). One stranded
	// pending is unsure only if a send of it ended so (ClosingFailed); an
	// open place given (ClosedUnsent: a closing message never tried) is
	// kept as it is.
	closed := row.Closed
	if closed != "" && !outbox.PlaceOpen(closed) {
		closed = outbox.ClosingFailed(row, row.Status == outbox.StatusClaimed)
	}
	err := s.keepingHistory(ctx, "expire", row.Key, cond, func() expression.UpdateBuilder {
		upd := failUpdate(row.Queue, now, row.UnsureAt, history)
		if closed != "" {
			upd = upd.Set(expression.Name(AttrClosed), expression.Value(closed))
		}
		return upd
	})
	if isSizeError(err) {
		return s.failTooLarge(ctx, "expire", row.Key, cond, now, row.UnsureAt, err)
	}
	return err
}

// Quarantine implements outbox.Store. Its condition is the malformed
// definition (validState, shared with the decoder), so no valid row can be
// touched by it. The reason is appended to the error history stored, which
// is kept: moved aside, to errors_unreadable, if it is not a list.
func (s *Store) Quarantine(ctx context.Context, key string, now time.Time, reason string) error {
	malformed := expression.AttributeExists(expression.Name(AttrKey)).And(expression.Not(validState(now)))
	entry := encodeErrors([]outbox.AttemptError{{At: now, Message: reason}})
	errs := expression.Name(AttrErrors)
	listOrNone := expression.AttributeNotExists(errs).Or(errs.AttributeType(expression.List))
	upd := failUpdate("", now, time.Time{}, nil).
		Set(errs, expression.ListAppend(expression.IfNotExists(errs, expression.Value([]attemptError{})), expression.Value(entry))).
		Set(expression.Name(AttrLastError), expression.Value(reason)).
		Set(expression.Name(AttrAttempt), expression.Value(0))
	_, err := s.update(ctx, "quarantine", key, malformed.And(listOrNone), upd, types.ReturnValueNone)
	var conflict *outbox.ConflictError
	if errors.As(err, &conflict) && conflict.Malformed != "" {
		// Malformed, with a history that is not a list: keep it aside.
		upd := failUpdate("", now, time.Time{}, nil).
			Set(expression.Name(AttrErrorsUnreadable), errs).
			Set(errs, expression.Value(entry)).
			Set(expression.Name(AttrLastError), expression.Value(reason)).
			Set(expression.Name(AttrAttempt), expression.Value(0))
		cond := malformed.And(expression.AttributeExists(errs)).And(expression.Not(errs.AttributeType(expression.List)))
		_, err = s.update(ctx, "quarantine", key, cond, upd, types.ReturnValueNone)
	}
	if isSizeError(err) {
		return s.failTooLarge(ctx, "quarantine", key, malformed, now, time.Time{}, err)
	}
	return err
}

// failTooLarge dead-letters a row whose transition failed on DynamoDB's
// item size limit, under the transition's own condition: it keeps
// everything stored, sets only the reason and the dead-index keys, and
// drops the due-index keys and the claim, so it shrinks the item unless the
// queue name is long. If even that does not fit, the row leaves the due
// index as failed without the dead-index keys, so it stops costing a
// refused write per sweep; the error says so, and names the key.
func (s *Store) failTooLarge(ctx context.Context, op, key string, cond expression.ConditionBuilder, now, unsureAt time.Time, cause error) error {
	// The reason is short on purpose: it must fit where the transition
	// did not. The error returned gives the detail.
	return s.failRefused(ctx, op, key, cond, now, unsureAt, fmt.Sprintf("%s: %s", ErrItemTooLarge, op),
		fmt.Sprintf("the %s would pass DynamoDB's item size limit", op), cause)
}

// failRefused dead-letters a row whose transition DynamoDB refused for
// good (cause), as failTooLarge describes, storing reason; why says, in the
// error returned, what was refused. unsureAt is the row's UnsureAt, kept
// (see withUnsureAt).
func (s *Store) failRefused(ctx context.Context, op, key string, cond expression.ConditionBuilder, now, unsureAt time.Time, reason, why string, cause error) error {
	queue := ""
	if out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.cfg.Table), Key: keyOf(key), ConsistentRead: aws.Bool(true),
		ProjectionExpression: aws.String("#q"), ExpressionAttributeNames: map[string]string{"#q": AttrQueue},
	}); err == nil {
		if q, ok := out.Item[AttrQueue].(*types.AttributeValueMemberS); ok {
			queue = q.Value
		}
	}
	// A builder shares its operations with every copy, so each update is
	// built afresh.
	leaveDue := func() expression.UpdateBuilder {
		return expression.Set(expression.Name(AttrStatus), expression.Value(outbox.StatusFailed)).
			Remove(expression.Name(AttrShard)).Remove(expression.Name(AttrDueAt)).
			Remove(expression.Name(AttrToken)).Remove(expression.Name(AttrLeaseUntil)).Remove(expression.Name(AttrClaimedAt))
	}
	dead := withUnsureAt(leaveDue().Set(expression.Name(AttrFailedAt), expression.Value(now.UnixMilli())).
		Set(expression.Name(AttrDeadQueue), expression.Value(deadQueue(queue))).
		Set(expression.Name(AttrLastError), expression.Value(reason)), unsureAt)
	_, err := s.update(ctx, op+" (too large)", key, cond, dead, types.ReturnValueNone)
	if err == nil {
		return fmt.Errorf("%w: %s: %s: %s (after: %w)", outbox.ErrDeadLettered, key, reason, why, cause)
	}
	if isSizeError(err) {
		if _, err = s.update(ctx, op+" (too large)", key, cond, leaveDue(), types.ReturnValueNone); err == nil {
			return fmt.Errorf("%w: %s: %s, and too large even for the dead index: it left the due index as failed; read it with outflow dead show %s (after: %w)",
				outbox.ErrDeadLettered, key, reason, key, cause)
		}
	}
	return err
}

// Release implements outbox.Store: the attempt the claim took is given back
// because nothing was sent.
func (s *Store) Release(ctx context.Context, row outbox.Row) error {
	upd := expression.Set(expression.Name(AttrStatus), expression.Value(outbox.StatusPending)).
		Set(expression.Name(AttrAttempt), expression.Name(AttrAttempt).Minus(expression.Value(1))).
		Set(expression.Name(AttrShard), s.shardIfMissing(row)).
		Remove(expression.Name(AttrToken)).Remove(expression.Name(AttrLeaseUntil))
	_, err := s.update(ctx, "release", row.Key, holds(row), upd, types.ReturnValueNone)
	return err
}

// Index implements outbox.Store: it gives an unindexed row its shard, so
// the row enters the due index as it is (its due_at is already there).
// The condition is the settle's (holds): for a row the wake sent
// unclaimed, that it is still as staged. One write: the table's and the
// index entry's put.
func (s *Store) Index(ctx context.Context, row outbox.Row) error {
	upd := expression.Set(expression.Name(AttrShard), expression.Value(ShardFor(row, s.cfg.Shards)))
	_, err := s.update(ctx, "index", row.Key, holds(row).And(expression.AttributeNotExists(expression.Name(AttrShard))), upd, types.ReturnValueNone)
	return err
}

// shardIfMissing keeps a row's shard, or gives it its own (ShardFor): a producer
// in another language may write a row with no shard, which only the wake
// (by its stream record) ever claims, and which, once back to pending,
// must be in the due index for the sweep to find it again.
func (s *Store) shardIfMissing(row outbox.Row) expression.SetValueBuilder {
	return expression.IfNotExists(expression.Name(AttrShard), expression.Value(ShardFor(row, s.cfg.Shards)))
}

// Redrive returns a failed row to pending with a fresh budget, due now.
// Only failed rows move; any other gives a *outbox.ConflictError.
// A row of an ordered group goes back to its group's shard (ShardFor),
// at the price of one refused write (see placing). A dead letter whose
// place's closing message may have reached the consumer
// (outbox.MayHaveClosed) does not move either: it gives a
// *MayHaveClosedError, since the row could then arrive after its place was
// closed, to be recorded late and applied nowhere; RedriveLate moves it.
func (s *Store) Redrive(ctx context.Context, key string, now time.Time) error {
	return s.redrive(ctx, key, now, false)
}

// RedriveLate is Redrive for a dead letter whose place's closing message
// may have reached the consumer too (outbox.MayHaveClosed): the operator
// knows the row may arrive after its place was closed (a GapWait
// consumer's Inbox records it late, and by default applies nothing).
func (s *Store) RedriveLate(ctx context.Context, key string, now time.Time) error {
	return s.redrive(ctx, key, now, true)
}

// MayHaveClosedError is a redrive refused because the message closing
// the row's place may have reached the consumer (outbox.MayHaveClosed).
type MayHaveClosedError struct {
	Key string
	// Closed is the row's closed.
	Closed string
	// RedrivenLate is when the row was redriven as late before, if it
	// was (outbox.Row.PlaceMaybeClosed).
	RedrivenLate time.Time
}

// Error says why the row was not redriven and what to do instead.
func (e *MayHaveClosedError) Error() string {
	why := fmt.Sprintf("closed %q", e.Closed)
	if !e.RedrivenLate.IsZero() {
		why = "it was redriven as late on " + e.RedrivenLate.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("%s: not redriven: the message closing its place may have reached the consumer (%s), "+
		"so the row could arrive after its place was closed, to be recorded late and applied nowhere by a GapWait consumer; "+
		"purge it to close its place for certain (the closing message is sent again), or redrive it as late", e.Key, why)
}

func (s *Store) redrive(ctx context.Context, key string, now time.Time, late bool) error {
	cond := func() expression.ConditionBuilder {
		failed := expression.Name(AttrStatus).Equal(expression.Value(outbox.StatusFailed))
		if late {
			return failed
		}
		closed := expression.Name(AttrClosed)
		return failed.And(expression.AttributeNotExists(expression.Name(AttrPlaceMaybeClosed))).And(expression.Or(expression.AttributeNotExists(closed),
			expression.And(closed.NotEqual(expression.Value(outbox.ClosedUnsure)), closed.NotEqual(expression.Value(outbox.ClosedPurgeUnsure)))))
	}
	upd := func(shard string) expression.UpdateBuilder {
		u := expression.Set(expression.Name(AttrStatus), expression.Value(outbox.StatusPending))
		if late {
			// Its place may be closed at the consumer: kept for good.
			u = u.Set(expression.Name(AttrPlaceMaybeClosed), expression.Value(now.UnixMilli()))
		}
		return u.
			Set(expression.Name(AttrAttempt), expression.Value(0)).
			Set(expression.Name(AttrDueAt), expression.Value(now.UnixMilli())).
			Set(expression.Name(AttrShard), expression.Value(shard)).
			Set(expression.Name(AttrRedrivenAt), expression.Value(now.UnixMilli())).
			Remove(expression.Name(AttrFailedAt)).Remove(expression.Name(AttrDeadQueue)).
			// A redriven row goes as itself, whatever closed its place.
			Remove(expression.Name(AttrClosed))
	}
	err := s.placing(ctx, "redrive", key, cond, upd)
	var conflict *outbox.ConflictError
	if !late && errors.As(err, &conflict) && conflict.Current != nil && conflict.Current.Status == outbox.StatusFailed &&
		(outbox.MayHaveClosed(conflict.Current.Closed) || !conflict.Current.PlaceMaybeClosed.IsZero()) {
		return &MayHaveClosedError{Key: key, Closed: conflict.Current.Closed, RedrivenLate: conflict.Current.PlaceMaybeClosed}
	}
	return err
}

// keepingHistory runs an update that replaces the stored error history
// under cond, keeping a stored history that is not a list under
// errors_unreadable, as the quarantine does, rather than losing it. upd
// builds the update afresh for each try (a builder shares its operations
// with every copy).
func (s *Store) keepingHistory(ctx context.Context, op, key string, cond expression.ConditionBuilder, upd func() expression.UpdateBuilder) error {
	errs := expression.Name(AttrErrors)
	listOrNone := expression.AttributeNotExists(errs).Or(errs.AttributeType(expression.List))
	_, err := s.update(ctx, op, key, cond.And(listOrNone), upd(), types.ReturnValueNone)
	var conflict *outbox.ConflictError
	if !errors.As(err, &conflict) {
		return err
	}
	// Refused: by cond, or by a history that is not a list. Try the
	// latter; if cond is what failed, this is refused too, and says so.
	unreadable := expression.AttributeExists(errs).And(expression.Not(errs.AttributeType(expression.List)))
	_, err = s.update(ctx, op, key, cond.And(unreadable), upd().Set(expression.Name(AttrErrorsUnreadable), errs), types.ReturnValueNone)
	return err
}

// failUpdate moves a row from the due index to the dead index, keeping
// unsureAt (see withUnsureAt).
func failUpdate(queue string, now, unsureAt time.Time, history []outbox.AttemptError) expression.UpdateBuilder {
	upd := withHistory(expression.Set(expression.Name(AttrStatus), expression.Value(outbox.StatusFailed)), history).
		Set(expression.Name(AttrFailedAt), expression.Value(now.UnixMilli())).
		Set(expression.Name(AttrDeadQueue), expression.Value(deadQueue(queue))).
		Remove(expression.Name(AttrShard)).Remove(expression.Name(AttrDueAt)).
		Remove(expression.Name(AttrToken)).Remove(expression.Name(AttrLeaseUntil))
	return withUnsureAt(upd, unsureAt)
}

// withUnsureAt sets AttrUnsureAt to the row's UnsureAt, if it has one. It
// is never removed: a request of unknown outcome can land whatever the
// row's later attempts did.
func withUnsureAt(upd expression.UpdateBuilder, unsureAt time.Time) expression.UpdateBuilder {
	if unsureAt.IsZero() {
		return upd
	}
	return upd.Set(expression.Name(AttrUnsureAt), expression.Value(unsureAt.UnixMilli()))
}

func withHistory(upd expression.UpdateBuilder, history []outbox.AttemptError) expression.UpdateBuilder {
	if len(history) == 0 {
		return upd
	}
	return upd.Set(expression.Name(AttrErrors), expression.Value(encodeErrors(history))).
		Set(expression.Name(AttrLastError), expression.Value(history[len(history)-1].Message))
}

func keyOf(key string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{AttrKey: &types.AttributeValueMemberS{Value: key}}
}

// update runs one conditional UpdateItem. On a refused condition it returns
// a *outbox.ConflictError carrying the row as it was.
func (s *Store) update(ctx context.Context, op, key string, cond expression.ConditionBuilder, upd expression.UpdateBuilder, ret types.ReturnValue) (*dynamodb.UpdateItemOutput, error) {
	out, err := s.updateRaw(ctx, op, key, cond, upd, ret)
	return out, s.wrap(op, key, err)
}

// updateRaw is update with DynamoDB's own error: a refused condition is a
// *types.ConditionalCheckFailedException carrying the item as stored.
func (s *Store) updateRaw(ctx context.Context, op, key string, cond expression.ConditionBuilder, upd expression.UpdateBuilder, ret types.ReturnValue) (*dynamodb.UpdateItemOutput, error) {
	expr, err := expression.NewBuilder().WithCondition(cond).WithUpdate(upd).Build()
	if err != nil {
		return nil, fmt.Errorf("build %s expression: %w", op, err)
	}
	out, err := s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           aws.String(s.cfg.Table),
		Key:                                 keyOf(key),
		ConditionExpression:                 expr.Condition(),
		UpdateExpression:                    expr.Update(),
		ExpressionAttributeNames:            expr.Names(),
		ExpressionAttributeValues:           expr.Values(),
		ReturnValues:                        ret,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	return out, err
}

// claimUpdate is update for a claim that writes token. A refused
// condition on an item that holds that very token in its claim is this
// claim, applied by an earlier try of the same request whose answer was
// lost on the way back (the SDK sends it again): it is the claim's
// answer, not another worker's claim, which would hold the row, and on an
// ordered route its group, until the lease lapses. No other writer can
// hold the token, a random one per call.
func (s *Store) claimUpdate(ctx context.Context, key, token string, cond expression.ConditionBuilder, upd expression.UpdateBuilder) (*dynamodb.UpdateItemOutput, error) {
	out, err := s.updateRaw(ctx, "claim", key, cond, upd, types.ReturnValueAllNew)
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) && heldBy(ccf.Item, token) {
		return &dynamodb.UpdateItemOutput{Attributes: ccf.Item}, nil
	}
	return out, s.wrap("claim", key, err)
}

// heldBy reports whether item is claimed under token.
func heldBy(item map[string]types.AttributeValue, token string) bool {
	status, _ := item[AttrStatus].(*types.AttributeValueMemberS)
	held, _ := item[AttrToken].(*types.AttributeValueMemberS)
	return status != nil && held != nil && outbox.Status(status.Value) == outbox.StatusClaimed && held.Value == token
}

// wrap turns a refused condition into a *outbox.ConflictError and wraps
// any other error with the operation and key.
func (s *Store) wrap(op, key string, err error) error {
	if err == nil {
		return nil
	}
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return fmt.Errorf("%s %s: %w", op, key, err)
	}
	conflict := &outbox.ConflictError{Key: key, Op: op}
	if len(ccf.Item) > 0 {
		row, derr := Decode(ccf.Item)
		if _, serr := decodeState(ccf.Item); serr != nil {
			conflict.Malformed = serr.Error()
		} else if derr == nil || row.Key != "" {
			conflict.Current = &row
		}
	}
	return conflict
}
