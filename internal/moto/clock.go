package moto

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// StepSQSClock makes the SQS clock of the moto server at endpoint move on
// by step at each reading, on top of the wall clock (0: the wall clock
// again). moto reads it for every message a receive looks at, so a test
// can make a message's visibility lapse in the middle of one receive, which
// the wall clock does only by chance. The clock never goes back: what it
// gained stays. It is the server's, so the test needs a server of its own
// (Start).
func StepSQSClock(ctx context.Context, endpoint string, step time.Duration) error {
	u := strings.TrimSuffix(endpoint, "/") + "/outflow-faults/sqs-clock?step_ms=" + strconv.FormatFloat(float64(step)/float64(time.Millisecond), 'f', -1, 64)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return fmt.Errorf("step the sqs clock: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("step the sqs clock: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != "set" {
		return fmt.Errorf("step the sqs clock on %s: %w (status %d)", endpoint, ErrNoFaults, resp.StatusCode)
	}
	return nil
}
