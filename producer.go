package outflow

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/oklog/ulid/v2"

	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
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
}

// Producer stages rows into one outbox table. It is safe for concurrent use.
type Producer struct {
	store    *dynamo.Store
	maxBytes int
	now      func() time.Time
}

// NewProducer returns a producer over client, a *dynamodb.Client or
// anything with its item methods.
func NewProducer(client dynamo.API, cfg Config) (*Producer, error) {
	if cfg.Shards == 0 {
		cfg.Shards = 4
	}
	store, err := dynamo.New(client, dynamo.Config{Table: cfg.Table, Shards: cfg.Shards})
	if err != nil {
		return nil, err
	}
	return &Producer{store: store, maxBytes: cfg.MaxMessageBytes, now: time.Now}, nil
}

// prepare validates a row and fills in its key.
func (p *Producer) prepare(r Row) (outbox.Row, error) {
	if err := r.Validate(p.maxBytes); err != nil {
		return outbox.Row{}, err
	}
	if r.Key == "" {
		r.Key = ulid.MustNew(ulid.Timestamp(p.now()), rand.Reader).String()
	}
	return outbox.Row{Key: r.Key, Queue: r.Queue, Payload: r.Payload, Attributes: maps.Clone(r.Attributes), Group: r.Group, NotBefore: r.NotBefore}, nil
}

// TransactItem validates row and returns the conditional put that stages
// it, for your own TransactWriteItems: the transaction fails if the key is
// already staged. An empty Key is filled with a new ULID; read it back
// from the returned item if you need it.
func (p *Producer) TransactItem(r Row) (types.TransactWriteItem, error) {
	row, err := p.prepare(r)
	if err != nil {
		return types.TransactWriteItem{}, err
	}
	in, err := p.store.StageInput(row, p.now())
	if err != nil {
		return types.TransactWriteItem{}, err
	}
	return types.TransactWriteItem{Put: &types.Put{
		TableName:                 in.TableName,
		Item:                      in.Item,
		ConditionExpression:       in.ConditionExpression,
		ExpressionAttributeNames:  in.ExpressionAttributeNames,
		ExpressionAttributeValues: in.ExpressionAttributeValues,
	}}, nil
}

// Put stages rows on their own (not in a transaction), concurrently. It is
// idempotent: a key already staged with the same content is success, with
// different content an error wrapping ErrKeyConflict. It returns the keys
// in order (generated where Key was empty) and every error, joined.
func (p *Producer) Put(ctx context.Context, rows ...Row) ([]string, error) {
	keys := make([]string, len(rows))
	errs := make([]error, len(rows))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, r := range rows {
		row, err := p.prepare(r)
		if err != nil {
			errs[i] = fmt.Errorf("row %d: %w", i, err)
			continue
		}
		keys[i] = row.Key
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			errs[i] = p.put(ctx, row)
		})
	}
	wg.Wait()
	return keys, errors.Join(errs...)
}

func (p *Producer) put(ctx context.Context, row outbox.Row) error {
	err := p.store.Stage(ctx, row, p.now())
	var conflict *outbox.ConflictError
	if !errors.As(err, &conflict) {
		return err
	}
	if conflict.Current != nil && dynamo.SameContent(*conflict.Current, row) {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrKeyConflict, row.Key)
}
