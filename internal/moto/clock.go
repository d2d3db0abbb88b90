package moto

import (
	"context"
	"strconv"
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
	ms := strconv.FormatFloat(float64(step)/float64(time.Millisecond), 'f', -1, 64)
	return postFault(ctx, endpoint, "sqs-clock?step_ms="+ms, "set", "step the sqs clock")
}
