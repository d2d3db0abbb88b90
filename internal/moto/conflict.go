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

// ErrNoFaults is returned by InjectTransactionConflict and StepSQSClock
// when the endpoint is not a moto server started through server.py
// (LocalStack, real AWS), which cannot inject faults: a test skips then.
var ErrNoFaults = errors.New("the endpoint does not inject faults")

// InjectTransactionConflict makes the next TransactWriteItems that touches
// the item whose hash key is key, in table, cancel with a
// TransactionConflict reason for that item, as DynamoDB does when another
// transaction holds the item. moto serialises every write, so without this
// a test could never see one.
func InjectTransactionConflict(ctx context.Context, endpoint, table, key string) error {
	q := url.Values{"table": {table}, "key": {key}}
	return postFault(ctx, endpoint, "transaction-conflict?"+q.Encode(), "armed", "inject transaction conflict")
}

// postFault posts to server.py's fault endpoint path and checks its
// answer is want.
func postFault(ctx context.Context, endpoint, path, want, what string) error {
	u := strings.TrimSuffix(endpoint, "/") + "/outflow-faults/" + path
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != want {
		return fmt.Errorf("%s on %s: %w (status %d)", what, endpoint, ErrNoFaults, resp.StatusCode)
	}
	return nil
}
