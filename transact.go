package outflow

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/outflowhq/outflow/internal/dynamo"
)

// Transact stages rows together with your own writes in one
// TransactWriteItems: it appends each row's writes (those TransactItems
// gives) after in.TransactItems, sends the transaction with the
// producer's client, and explains a cancellation with Classify. It
// returns the rows' keys, generated where Key was empty. in is not
// changed. Either every write commits or none does.
//
// It sends once: whether to send your writes again is yours to decide
// (errors.As a *TransactError and ask Retryable). A transaction stages at
// most one row per ordered group, since each moves the group's tail. For
// the transaction's output (consumed capacity), use TransactItems,
// TransactWriteItems and Classify yourself.
func (p *Producer) Transact(ctx context.Context, in *dynamodb.TransactWriteItemsInput, rows ...Row) ([]string, error) {
	tx := *in
	tx.TransactItems = append([]types.TransactWriteItem(nil), in.TransactItems...)
	keys := make([]string, len(rows))
	groups := map[string]int{}
	for i, r := range rows {
		row, err := p.prepare(r)
		if err != nil {
			return nil, fmt.Errorf("row %d: %w", i, err)
		}
		if p.ordered[row.Queue] {
			id := dynamo.GroupKey(row.Queue, row.Group)
			if j, ok := groups[id]; ok {
				return nil, fmt.Errorf("rows %d and %d: %w: both in group %q of %s, and a transaction moves a group's tail once", j, i, ErrOrderedRoute, row.Group, row.Queue)
			}
			groups[id] = i
		}
		items, err := p.stageItems(ctx, row)
		if err != nil {
			return nil, fmt.Errorf("row %d: %w", i, err)
		}
		keys[i] = row.Key
		tx.TransactItems = append(tx.TransactItems, items...)
	}
	if _, err := p.api.TransactWriteItems(ctx, &tx); err != nil {
		return nil, p.Classify(ctx, fmt.Errorf("stage %d rows in a transaction: %w", len(rows), err), tx.TransactItems)
	}
	return keys, nil
}
