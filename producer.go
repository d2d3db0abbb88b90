package outflow

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/oklog/ulid/v2"

	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
	"github.com/outflowhq/outflow/internal/target"
)

// Config says where and how rows are staged.
type Config struct {
	// Table is the outbox table name.
	Table string
	// Shards must equal the dispatcher's OUTFLOW_SHARDS (default 4).
	Shards int
	// MaxMessageBytes must equal the dispatcher's OUTFLOW_MAX_MESSAGE_BYTES
	// (default 262144).
	MaxMessageBytes int
	// Ordered lists the routes whose rows reach their queue in staging
	// order per message group (FIFO routes, named in the dispatcher's
	// OUTFLOW_ORDERED too). Staging rows of such a group in one
	// transaction costs a consistent read of the group's tail, and one
	// update of the group's item besides the rows' puts.
	//
	// Nil reads them from the dispatcher's published configuration in
	// the table when a row of a FIFO route is first staged, and again
	// once a minute (one strongly consistent GetItem); with none
	// published, rows of FIFO routes are refused (ErrOrderUnknown), since
	// a row of an ordered route staged without its place would reach its
	// consumer in no order. An empty, non-nil list says no route is
	// ordered.
	Ordered []string
	// Routes is the dispatcher's OUTFLOW_ROUTES. Given, each row is
	// checked against its route's target (an SNS topic's limits; an
	// EventBridge bus's JSON detail, source and detail-type), and a row for
	// a route not in it is refused with ErrNoRoute. Empty, every row is
	// checked against SQS's rules.
	Routes string
	// Lean stages unordered rows due at once with no due-index keys: the
	// dispatcher's stream wake delivers them, its backstop finds the ones
	// the stream missed, and each costs one write unit less to stage and
	// one less to settle. Set it only for a dispatcher that runs lean
	// (OUTFLOW_LEAN, published: Published.Apply sets it), since no other
	// looks for such rows. Rows of ordered routes and rows with a
	// NotBefore are staged in the due index whatever it says: the sweep
	// is what sends a delayed row when it falls due, and a group's later
	// rows when their head settles.
	Lean bool

	// publishedIn is the table Published.Apply read Routes from, and
	// publishedRoutes those routes: a producer whose Routes are still
	// those refuses a row of another route naming the table and the
	// routes the dispatcher published there, as outflow enqueue does.
	publishedIn     string
	publishedRoutes map[string]string
}

// Producer stages rows into one outbox table. It is safe for concurrent use.
type Producer struct {
	api      DynamoDB
	store    *dynamo.Store
	maxBytes int
	ordered  *orderedRoutes
	// targets is Config.Routes read; nil when none were given.
	targets map[string]target.Target
	// routesFrom says where targets came from, for a row of a route not
	// in them: "given", or the table the dispatcher published them in.
	routesFrom string
	lean       bool
	now        func() time.Time
}

// NewProducer returns a producer over client, a *dynamodb.Client or
// anything else with the DynamoDB methods.
func NewProducer(client DynamoDB, cfg Config) (*Producer, error) {
	if cfg.Shards == 0 {
		cfg.Shards = 4
	}
	store, err := dynamo.NewStaging(client, dynamo.Config{Table: cfg.Table, Shards: cfg.Shards})
	if err != nil {
		return nil, err
	}
	ordered, err := newOrderedRoutes(cfg.Ordered, func(ctx context.Context) (map[string]bool, error) {
		p, err := dynamo.ReadPublished(ctx, client, cfg.Table)
		if err != nil {
			return nil, err
		}
		set := make(map[string]bool, len(p.Ordered))
		for q := range p.Ordered {
			set[q] = true
		}
		return set, nil
	})
	if err != nil {
		return nil, err
	}
	var targets map[string]target.Target
	routesFrom := "given"
	if strings.TrimSpace(cfg.Routes) != "" {
		routes, err := target.ParseRoutes(cfg.Routes)
		if err != nil {
			return nil, fmt.Errorf("routes: %w", err)
		}
		if targets, err = routes.Targets(); err != nil {
			return nil, fmt.Errorf("routes: %w", err)
		}
		if cfg.publishedIn != "" && maps.Equal(routes, cfg.publishedRoutes) {
			routesFrom = "the dispatcher published in table " + cfg.publishedIn
		}
	}
	if err := checkOrderedRouted(cfg.Ordered, targets); err != nil {
		return nil, err
	}
	return &Producer{api: client, store: store, maxBytes: cfg.MaxMessageBytes, ordered: ordered, targets: targets, routesFrom: routesFrom,
		lean: cfg.Lean, now: time.Now}, nil
}

// prepare validates a row and fills in its key, and with trace an empty
// trace context from ctx. ordered reports whether its route is ordered,
// also for a row refused.
func (p *Producer) prepare(ctx context.Context, r Row, trace bool) (row outbox.Row, ordered bool, err error) {
	t := target.Target{Kind: target.KindSQS, FIFO: outbox.FIFORoute(r.Queue)}
	if p.targets != nil {
		routed, ok := p.targets[r.Queue]
		if !ok && strings.TrimSpace(r.Queue) != "" {
			return outbox.Row{}, false, fmt.Errorf("%w: route %q is not one of the routes %s (%s)",
				ErrNoRoute, r.Queue, p.routesFrom, strings.Join(slices.Sorted(maps.Keys(p.targets)), ", "))
		}
		t = routed
	}
	ordered, unknown := p.ordered.ordered(ctx, r.Queue)
	if unknown != nil {
		// Checked as strictly as an ordered row (one attribute less), so
		// a row the target refuses says so first.
		ordered = true
	}
	if _, given := r.Attributes[outbox.AttrTraceParent]; trace && !given && r.TraceParent == "" {
		// The context's trace goes only where it fits: a row valid without
		// it is never refused for it.
		traced := r
		if traced.TraceParent = TraceParent(ctx); traced.TraceParent != "" && traced.validate(t, p.maxBytes, ordered) == nil {
			r = traced
		}
	}
	if err := r.validate(t, p.maxBytes, ordered); err != nil {
		// ordered still says where the row belonged: Put holds its
		// group's later rows back.
		return outbox.Row{}, ordered, err
	}
	if unknown != nil {
		return outbox.Row{}, ordered, unknown
	}
	if r.Key == "" {
		r.Key = ulid.MustNew(ulid.Timestamp(p.now()), rand.Reader).String()
	}
	attrs, _ := r.attributes() // validate checked them
	return outbox.Row{Key: r.Key, Queue: r.Queue, Payload: r.Payload, Attributes: maps.Clone(attrs), Group: r.Group, NotBefore: r.NotBefore,
		Unindexed: p.lean && !ordered && r.NotBefore.IsZero()}, ordered, nil
}

// TransactItem validates row and returns the conditional put that stages
// it, for your own TransactWriteItems: the transaction fails if the key is
// already staged (Classify tells you how). An empty Key is filled with a
// new ULID; read it back from the returned item if you need it.
//
// A row of an ordered route needs TransactItems instead.
func (p *Producer) TransactItem(r Row) (types.TransactWriteItem, error) {
	row, ordered, err := p.prepare(context.Background(), r, false)
	if err != nil {
		return types.TransactWriteItem{}, err
	}
	if ordered {
		return types.TransactWriteItem{}, fmt.Errorf("%w: route %s is ordered: stage its rows with TransactItems", ErrOrderedRoute, row.Queue)
	}
	return p.put(row)
}

// put is the conditional put that stages an unordered row. It asks for
// the staged item when the key is taken, so Classify can compare its
// content without reading it.
func (p *Producer) put(row outbox.Row) (types.TransactWriteItem, error) {
	in, err := p.store.StageInput(row, p.now())
	if err != nil {
		return types.TransactWriteItem{}, err
	}
	return types.TransactWriteItem{Put: &types.Put{
		TableName:                           in.TableName,
		Item:                                in.Item,
		ConditionExpression:                 in.ConditionExpression,
		ExpressionAttributeNames:            in.ExpressionAttributeNames,
		ExpressionAttributeValues:           in.ExpressionAttributeValues,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}, nil
}

// TransactItems validates rows and returns the writes that stage them, for
// your own TransactWriteItems: items[i] is the conditional put of rows[i]
// (read a generated Key back from it), and after the puts comes one
// update per ordered group the rows are in, in the order the groups first
// appear. An unordered row is its put alone, as TransactItem returns.
//
// Rows of an ordered route are appended to their group as a chain, in the
// order given: the first names the group's tail, read here with one
// consistent read per group, and each later row of the group the one
// before it, at consecutive places; the group's one update moves its tail
// to the group's last row. So an aggregate's events of one command (order
// created, lines added) stage together, in order, or not at all. If
// another producer stages into the same group before your transaction
// commits, DynamoDB cancels it (the group item's condition fails, or a
// TransactionConflict; Classify says which): call TransactItems again and
// retry. The rows are never staged out of their place.
//
// A transaction writes an item once, so two rows with one key are refused
// (ErrDuplicateKey), and it holds at most MaxTransactItems items, so rows
// that need more are refused (ErrTooManyItems); leave room for your own
// writes. Neither reads anything.
func (p *Producer) TransactItems(ctx context.Context, rows ...Row) ([]types.TransactWriteItem, error) {
	_, items, err := p.stageRows(ctx, rows, 0)
	return items, err
}

// MaxTransactItems is how many items DynamoDB takes in one
// TransactWriteItems.
const MaxTransactItems = 100

// stageRows prepares rows and builds the writes that stage them, as
// TransactItems lays them out, for a transaction that holds own items of
// the caller's besides. It returns the rows' keys too.
func (p *Producer) stageRows(ctx context.Context, rows []Row, own int) ([]string, []types.TransactWriteItem, error) {
	prepared := make([]outbox.Row, len(rows))
	keys := make([]string, len(rows))
	type groupID struct{ queue, group string }
	groups := map[groupID][]int{}
	var order []groupID
	seen := make(map[string]int, len(rows))
	isOrdered := make([]bool, len(rows))
	for i, r := range rows {
		row, ordered, err := p.prepare(ctx, r, true)
		if err != nil {
			return nil, nil, fmt.Errorf("row %d: %w", i, err)
		}
		isOrdered[i] = ordered
		if j, ok := seen[row.Key]; ok {
			// DynamoDB would refuse the whole transaction with a
			// validation error that names no row.
			return nil, nil, fmt.Errorf("rows %d and %d: %w: both have key %q, and a transaction writes an item once", j, i, ErrDuplicateKey, row.Key)
		}
		seen[row.Key] = i
		prepared[i], keys[i] = row, row.Key
		if ordered {
			id := groupID{row.Queue, row.Group}
			if _, ok := groups[id]; !ok {
				order = append(order, id)
			}
			groups[id] = append(groups[id], i)
		}
	}
	// Counted before any tail is read: a transaction too large fails
	// whatever the tails say.
	if n := own + len(rows) + len(order); n > MaxTransactItems {
		yours := ""
		if own > 0 {
			yours = fmt.Sprintf(" with the %d of yours", own)
		}
		return nil, nil, fmt.Errorf("%w: %d rows in %d ordered groups need %d items%s, and DynamoDB takes at most %d in one transaction",
			ErrTooManyItems, len(rows), len(order), n, yours, MaxTransactItems)
	}
	now := p.now()
	items := make([]types.TransactWriteItem, len(rows), len(rows)+len(order))
	for i, row := range prepared {
		if isOrdered[i] {
			continue // its group's chain puts it in place below
		}
		item, err := p.put(row)
		if err != nil {
			return nil, nil, fmt.Errorf("row %d: %w", i, err)
		}
		items[i] = item
	}
	for _, id := range order {
		idx := groups[id]
		chain := make([]outbox.Row, len(idx))
		for k, i := range idx {
			chain[k] = prepared[i]
		}
		tail, err := p.store.GroupTail(ctx, id.queue, id.group)
		if err != nil {
			return nil, nil, fmt.Errorf("row %d: %w", idx[0], err)
		}
		staged, err := p.store.StageChainItems(chain, now, tail)
		if err != nil {
			return nil, nil, fmt.Errorf("rows %v of group %q of %s: %w", idx, id.group, id.queue, err)
		}
		for k, i := range idx {
			items[i] = staged[k]
		}
		items = append(items, staged[len(staged)-1])
	}
	return keys, items, nil
}

// Put stages rows on their own (not in a transaction), concurrently. It is
// idempotent: a key already staged with the same content is success, with
// different content an error wrapping ErrKeyConflict. It returns the keys
// in order (generated where Key was empty) and every error, joined.
//
// Rows of an ordered route are staged one after another per group, in the
// order given; a row after one that failed in its group is not staged
// (its error wraps ErrNotStaged), so the group keeps the order you meant.
func (p *Producer) Put(ctx context.Context, rows ...Row) ([]string, error) {
	keys := make([]string, len(rows))
	errs := make([]error, len(rows))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	type groupID struct{ queue, group string }
	groups := map[groupID][]int{}
	var order []groupID
	prepared := make([]outbox.Row, len(rows))
	for i, r := range rows {
		row, ordered, err := p.prepare(ctx, r, true)
		if err != nil {
			errs[i] = fmt.Errorf("row %d: %w", i, err)
		}
		keys[i], prepared[i] = row.Key, row
		if ordered {
			id := groupID{r.Queue, r.Group}
			if _, ok := groups[id]; !ok {
				order = append(order, id)
			}
			groups[id] = append(groups[id], i)
			continue
		}
		if err != nil {
			continue
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			errs[i] = p.stage(ctx, row, p.store.Stage)
		})
	}
	for _, id := range order {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			var failed error
			for _, i := range groups[id] {
				if failed != nil {
					errs[i] = fmt.Errorf("row %d: %w: an earlier row of group %q failed", i, ErrNotStaged, id.group)
					continue
				}
				if errs[i] == nil {
					errs[i] = p.stage(ctx, prepared[i], p.store.StageOrdered)
				}
				failed = errs[i]
			}
		})
	}
	wg.Wait()
	return keys, errors.Join(errs...)
}

// stage stages row on its own, following Put's rule for a staged key.
func (p *Producer) stage(ctx context.Context, row outbox.Row, stage func(context.Context, outbox.Row, time.Time) error) error {
	err := stage(ctx, row, p.now())
	var conflict *outbox.ConflictError
	if !errors.As(err, &conflict) {
		return err
	}
	if conflict.Current != nil && dynamo.SameContent(*conflict.Current, row) {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrKeyConflict, row.Key)
}
