package dynamo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Item attribute names. Producers in other languages write these by hand;
// docs/other-languages.md documents them.
const (
	AttrKey        = "pk"
	AttrQueue      = "queue"
	AttrPayload    = "payload"
	AttrAttributes = "attributes"
	AttrGroup      = "group"
	AttrNotBefore  = "not_before"
	AttrStatus     = "status"
	AttrAttempt    = "attempt"
	AttrCreatedAt  = "created_at"
	AttrDueAt      = "due_at"
	AttrShard      = "shard"
	AttrToken      = "claim_token"
	AttrLeaseUntil = "lease_until"
	AttrClaimedAt  = "claimed_at"
	AttrDoneAt     = "done_at"
	AttrFailedAt   = "failed_at"
	AttrDeadQueue  = "dead_queue"
	AttrErrors     = "errors"
	AttrLastError  = "last_error"
	AttrExpiresAt  = "expires_at"
	AttrRedrivenAt = "redriven_at"
	// AttrPlaceMaybeClosed (N, ms) is outbox.Row.PlaceMaybeClosed: when
	// an operator redrove the row as late (Store.RedriveLate), its place's
	// closing message perhaps having reached the consumer. Kept for the
	// row's life: a later closing message that fails says its place may
	// be closed (outbox.ClosingFailed), and a plain redrive is refused.
	AttrPlaceMaybeClosed = "place_maybe_closed"
	// AttrClosed (S) is outbox.Row.Closed: set by a purge of a dead
	// letter with a place in an ordered group, which goes back to pending
	// to be sent as the message that closes its place.
	AttrClosed = "closed"
	// AttrSeq and AttrPrev order a row in its group: its place, from 1,
	// and its predecessor's key. A group item holds AttrSeq and AttrTail.
	AttrSeq  = "seq"
	AttrPrev = "prev"
	AttrTail = "tail"
	// AttrUnsureAt (N, ms) is outbox.Row.UnsureAt: the latest time a send
	// of the row ended with its outcome unknown, or a claim of it lapsed.
	// Under skip, a dead letter's group waits outbox.Policy.UnsureWait
	// past it. Set, never removed, a redrive included.
	AttrUnsureAt = "unsure_at"
	// AttrStageID (S) is outbox.Row.StageID: a random value written by
	// each staging of a row and by nothing else, so the wake's unclaimed
	// settle (asStaged) can tell this row from a later one of its key,
	// even one staged in the same millisecond. A producer that does not
	// write it (another language's, by hand) is still delivered: its rows
	// take the claimed path.
	AttrStageID = "stage_id"
	// AttrContent (S) is outbox.Row.ContentDigest: written by the settle
	// that keeps a delivered row as done (a tombstone), which removes the
	// row's AttrPayload and AttrAttributes; ContentDigest says how it is
	// made. Only a done row has it.
	AttrContent = "content"
	// AttrErrorsUnreadable keeps an error history a quarantine found in a
	// form it could not append to.
	AttrErrorsUnreadable = "errors_unreadable"
)

// Attributes of the published configuration item (ConfigItem), and of no
// row: none is an index key, the status or the TTL attribute.
const (
	AttrFormat          = "format"
	AttrRoutes          = "routes"
	AttrOrdered         = "ordered"
	AttrShards          = "shards"
	AttrMaxMessageBytes = "max_message_bytes"
	AttrRevision        = "revision"
	AttrPublishedAt     = "published_at"
	AttrPublishedBy     = "published_by"
	// AttrUnsureWait (N, ms) is the dispatcher's outbox.Policy.UnsureWait:
	// how long after a send ended unsure a copy of it may still land,
	// which a purge waits out. Items published before it have none.
	AttrUnsureWait = "unsure_wait_ms"
	// AttrLean (BOOL, written only when true) says the dispatcher runs
	// lean: producers stage unordered rows due at once outside the due
	// index, and its sweep runs the backstop (Backstop) that finds the
	// ones the stream never delivered.
	AttrLean = "lean"
	// AttrVersion (S) is the dispatcher's release version
	// (internal/version): what `outflow config` and an operator compare
	// with their own. Items published before 1.0.0 have none.
	AttrVersion = "version"
)

// Index names.
const (
	DueIndex  = "due"
	DeadIndex = "dead"
)

// Index is one global secondary index of the table.
type Index struct {
	Name         string
	PartitionKey string
	SortKey      string
	// NonKeyAttributes are projected with INCLUDE; none means KEYS_ONLY.
	NonKeyAttributes []string
}

// Schema is the table layout. Table is the only value; CreateTable, the
// local runner and the template test all read it.
type Schema struct {
	PartitionKey string
	// KeyTypes gives the type of every attribute used in a key.
	KeyTypes     map[string]types.ScalarAttributeType
	Indexes      []Index
	StreamView   types.StreamViewType
	TTLAttribute string
	// Config is the one item that is neither a row nor a group item.
	Config ConfigItem
}

// ConfigItem describes the dispatcher's published configuration: one item
// at Key, with Attributes (and the key), each of the type given. It
// carries no status, no index key and no TTL attribute, so the stream
// filter, the wake, the indexes (and with them the sweep, the stray-row
// audit, stats and dead-letter commands) and TTL never see it.
type ConfigItem struct {
	Key        string
	Attributes map[string]types.ScalarAttributeType
	// Maps are the attributes that are maps of strings (M of S).
	Maps []string
}

// Table is Outflow's table schema.
//
// The due index holds only pending and claimed rows (shard and due_at are
// removed on settle), sharded so no index partition nears DynamoDB's
// per-partition write ceiling. It projects created_at and queue, which
// never change after staging, so a claim — which leaves both index keys
// alone — costs no index write.
// The dead index holds only failed rows, by queue and failure time.
var Table = Schema{
	PartitionKey: AttrKey,
	KeyTypes: map[string]types.ScalarAttributeType{
		AttrKey:       types.ScalarAttributeTypeS,
		AttrShard:     types.ScalarAttributeTypeS,
		AttrDueAt:     types.ScalarAttributeTypeN,
		AttrDeadQueue: types.ScalarAttributeTypeS,
		AttrFailedAt:  types.ScalarAttributeTypeN,
	},
	Indexes: []Index{
		{Name: DueIndex, PartitionKey: AttrShard, SortKey: AttrDueAt, NonKeyAttributes: []string{AttrCreatedAt, AttrQueue, AttrPrev, AttrSeq}},
		{Name: DeadIndex, PartitionKey: AttrDeadQueue, SortKey: AttrFailedAt, NonKeyAttributes: []string{AttrAttempt, AttrLastError}},
	},
	StreamView:   types.StreamViewTypeNewImage,
	TTLAttribute: AttrExpiresAt,
	Config: ConfigItem{
		Key: ConfigKey,
		Attributes: map[string]types.ScalarAttributeType{
			AttrFormat: types.ScalarAttributeTypeN, AttrShards: types.ScalarAttributeTypeN,
			AttrMaxMessageBytes: types.ScalarAttributeTypeN, AttrRevision: types.ScalarAttributeTypeN,
			AttrPublishedAt: types.ScalarAttributeTypeN, AttrPublishedBy: types.ScalarAttributeTypeS,
			AttrUnsureWait: types.ScalarAttributeTypeN,
		},
		Maps: []string{AttrRoutes, AttrOrdered},
	},
}

// WithoutLinks returns the schema with a due index that projects only
// created_at and queue, not prev and seq: the index of a table created
// before ordered groups, which template.yaml's DueIndexProjection keeps
// because DynamoDB (and so CloudFormation) cannot change an index's
// projection in place. The engine works on it unchanged: an index entry
// without a link reads as a row with no predecessor, and the claim, which
// returns the whole row, reveals the link, which is then checked with a
// strongly consistent read of the predecessor (the row is released unsent
// if it must wait), so order holds at the price of a claim.
func (s Schema) WithoutLinks() Schema {
	out := s
	out.Indexes = make([]Index, len(s.Indexes))
	for i, ix := range s.Indexes {
		if ix.Name == DueIndex {
			ix.NonKeyAttributes = slices.DeleteFunc(slices.Clone(ix.NonKeyAttributes), func(a string) bool { return a == AttrPrev || a == AttrSeq })
		}
		out.Indexes[i] = ix
	}
	return out
}

// CreateTableInput is the request that creates a table of this schema,
// billed on demand, encrypted, with its stream on.
func (s Schema) CreateTableInput(name string) *dynamodb.CreateTableInput {
	in := &dynamodb.CreateTableInput{
		TableName:   aws.String(name),
		BillingMode: types.BillingModePayPerRequest,
		KeySchema:   []types.KeySchemaElement{{AttributeName: aws.String(s.PartitionKey), KeyType: types.KeyTypeHash}},
		StreamSpecification: &types.StreamSpecification{
			StreamEnabled:  aws.Bool(true),
			StreamViewType: s.StreamView,
		},
		SSESpecification: &types.SSESpecification{Enabled: aws.Bool(true)},
	}
	used := map[string]bool{s.PartitionKey: true}
	for _, ix := range s.Indexes {
		proj := &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly}
		if len(ix.NonKeyAttributes) > 0 {
			proj = &types.Projection{ProjectionType: types.ProjectionTypeInclude, NonKeyAttributes: ix.NonKeyAttributes}
		}
		in.GlobalSecondaryIndexes = append(in.GlobalSecondaryIndexes, types.GlobalSecondaryIndex{
			IndexName: aws.String(ix.Name),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(ix.PartitionKey), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(ix.SortKey), KeyType: types.KeyTypeRange},
			},
			Projection: proj,
		})
		used[ix.PartitionKey], used[ix.SortKey] = true, true
	}
	for _, name := range sortedKeys(used) {
		in.AttributeDefinitions = append(in.AttributeDefinitions, types.AttributeDefinition{
			AttributeName: aws.String(name), AttributeType: s.KeyTypes[name],
		})
	}
	return in
}

// TableWait bounds how long creating a table may take to become active.
const TableWait = 2 * time.Minute

// CreateTable creates a table of this schema, waits until it is active
// and turns on its TTL attribute. An existing table of that name is an
// error.
func CreateTable(ctx context.Context, client *dynamodb.Client, name string) error {
	return Create(ctx, client, Table.CreateTableInput(name), Table.TTLAttribute)
}

// Create runs in, waits until the table is active and, if ttlAttribute is
// not empty, turns on TTL for it. The local runner passes the template's
// table here, tests and tools the Go schema.
func Create(ctx context.Context, client *dynamodb.Client, in *dynamodb.CreateTableInput, ttlAttribute string) error {
	name := aws.ToString(in.TableName)
	var attempts atomic.Int32
	_, err := client.CreateTable(ctx, in, countAttempts(&attempts))
	var inUse *types.ResourceInUseException
	if err != nil && !(errors.As(err, &inUse) && attempts.Load() > 1) {
		return fmt.Errorf("create table %s: %w", name, err)
	}
	// A table in use on a retried attempt is the first attempt's: the SDK
	// retries a create whose response was lost (a reset connection, a 5xx
	// from a loaded server) though the table was made. A name already
	// taken fails on the first attempt.
	waiter := dynamodb.NewTableExistsWaiter(client, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay = 100 * time.Millisecond
		o.MaxDelay = time.Second
	})
	if err := waiter.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, TableWait); err != nil {
		return fmt.Errorf("wait for table %s: %w", name, err)
	}
	if ttlAttribute == "" {
		return nil
	}
	_, err = client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String(name),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(ttlAttribute), Enabled: aws.Bool(true)},
	})
	if err != nil {
		return fmt.Errorf("enable ttl on %s: %w", name, err)
	}
	return nil
}

// countAttempts counts the attempts the SDK makes for one call.
func countAttempts(n *atomic.Int32) func(*dynamodb.Options) {
	return perAttempt("outflow-count-attempts", func(context.Context, error) { n.Add(1) })
}

// DeleteTable deletes the table; a missing table is not an error.
func DeleteTable(ctx context.Context, client *dynamodb.Client, name string) error {
	_, err := client.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	var missing *types.ResourceNotFoundException
	if err != nil && !errors.As(err, &missing) {
		return fmt.Errorf("delete table %s: %w", name, err)
	}
	return nil
}
