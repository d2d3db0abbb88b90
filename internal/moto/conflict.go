package moto

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// ErrNoFaults is returned by InjectTransactionConflict when the endpoint
// is not a moto server started through server.py (LocalStack, real AWS),
// which cannot inject faults: a test skips then.
var ErrNoFaults = errors.New("the endpoint does not inject faults")

// InjectTransactionConflict makes the next TransactWriteItems that touches
// the item whose hash key is key, in table, cancel with a
// TransactionConflict reason for that item, as DynamoDB does when another
// transaction holds the item. moto serialises every write, so without this
// a test could never see one.
func InjectTransactionConflict(ctx context.Context, endpoint, table, key string) error {
	q := url.Values{"table": {table}, "key": {key}}
	u := strings.TrimSuffix(endpoint, "/") + "/outflow-faults/transaction-conflict?" + q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return fmt.Errorf("inject transaction conflict: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("inject transaction conflict: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != "armed" {
		return fmt.Errorf("inject transaction conflict on %s: %w (status %d)", endpoint, ErrNoFaults, resp.StatusCode)
	}
	return nil
}
