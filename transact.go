package outflow

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Transact stages rows together with your own writes in one
// TransactWriteItems: it appends each row's writes (those TransactItems
// gives) after in.TransactItems, sends the transaction with the
// producer's client, and explains a cancellation with Classify. It
// returns the rows' keys, generated where Key was empty, with any error
// once the transaction was sent: after an error that is no cancellation
// (a lost response) the rows may be staged, and the keys find them. in
// (nil: no writes of yours) is not changed. Either every write commits or
// none does. A ClientRequestToken is refused: each call stages its rows
// anew, so DynamoDB would not take a resend for the same request.
//
// Several rows of one ordered group are chained in the order given, with
// one move of the group's tail (TransactItems says how), so they commit
// together and in order with your writes. Your items and the rows' count
// against DynamoDB's MaxTransactItems together: more is refused
// (ErrTooManyItems) before anything is read or sent.
//
// It sends once: whether to send your writes again is yours to decide
// (errors.As a *TransactError and ask Retryable). For the transaction's
// output (consumed capacity), use TransactItems, TransactWriteItems and
// Classify yourself.
func (p *Producer) Transact(ctx context.Context, in *dynamodb.TransactWriteItemsInput, rows ...Row) ([]string, error) {
	var tx dynamodb.TransactWriteItemsInput
	if in != nil {
		tx = *in
	}
	if tx.ClientRequestToken != nil {
		// DynamoDB takes a resend with the token as the same request only
		// if it sends the same items, and each call stages its rows
		// anew (created_at, due_at). Keyed rows make a resend safe
		// instead: ErrAlreadyStaged says the first one committed.
		return nil, errors.New("transact: ClientRequestToken cannot make a resend idempotent here (each call stages its rows anew): give rows keys, and take ErrAlreadyStaged as committed")
	}
	keys, items, err := p.stageRows(ctx, rows, len(tx.TransactItems))
	if err != nil {
		return nil, err
	}
	tx.TransactItems = append(append(make([]types.TransactWriteItem, 0, len(tx.TransactItems)+len(items)), tx.TransactItems...), items...)
	if _, err := p.api.TransactWriteItems(ctx, &tx); err != nil {
		// The keys too: an error that is no cancellation (a lost
		// response) leaves the outcome unknown, and the keys are how to
		// look for the rows.
		err = p.Classify(ctx, fmt.Errorf("stage %d rows in a transaction: %w", len(rows), err), tx.TransactItems)
		var canceled *TransactError
		if errors.As(err, &canceled) {
			for _, it := range canceled.Items {
				it.byTransact = true
			}
		}
		return keys, err
	}
	return keys, nil
}
