package delivery

import (
	"context"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/outflowhq/outflow/internal/outbox"
)

// API is the part of the SQS client the deliverer uses.
type API interface {
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
}

// SQS delivers rows with SendMessageBatch. It implements outbox.Deliverer.
type SQS struct {
	api      API
	routes   Routes
	maxBytes int
}

var _ outbox.Deliverer = (*SQS)(nil)

// New returns a deliverer over routes. maxBytes caps one message and one
// batch; 0 means MaxMessageBytes.
func New(api API, routes Routes, maxBytes int) *SQS {
	if maxBytes <= 0 {
		maxBytes = MaxMessageBytes
	}
	return &SQS{api: api, routes: routes, maxBytes: maxBytes}
}

// Deliver implements outbox.Deliverer. Rows that cannot be sent as they are
// — no route, too large, too many attributes, no FIFO group, or refused by
// SQS as the sender's fault — get a permanent error; a failed request or an
// SQS-side entry failure a transient one.
func (s *SQS) Deliver(ctx context.Context, queue string, rows []outbox.Row) []error {
	errs := make([]error, len(rows))
	url, ok := s.routes[queue]
	if !ok {
		for i := range errs {
			errs[i] = outbox.Permanent(fmt.Errorf("no route for queue %q", queue))
		}
		return errs
	}
	fifo := IsFIFO(url)

	var batch []types.SendMessageBatchRequestEntry
	var index []int // batch entry -> row
	bytes := 0
	flush := func() {
		if len(batch) > 0 {
			s.send(ctx, url, batch, index, errs)
		}
		batch, index, bytes = nil, nil, 0
	}
	for i, row := range rows {
		e, size, err := entry(strconv.Itoa(i), row, fifo)
		switch {
		case err != nil:
			errs[i] = outbox.Permanent(err)
			continue
		case size > s.maxBytes:
			errs[i] = outbox.Permanent(fmt.Errorf("%w: %d bytes with attributes, over the %d-byte limit", ErrTooLarge, size, s.maxBytes))
			continue
		}
		if len(batch) == MaxBatchEntries || bytes+size > s.maxBytes {
			flush()
		}
		batch, index, bytes = append(batch, e), append(index, i), bytes+size
	}
	flush()
	return errs
}

// send makes one SendMessageBatch call and records each entry's outcome.
func (s *SQS) send(ctx context.Context, url string, batch []types.SendMessageBatchRequestEntry, index []int, errs []error) {
	out, err := s.api.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: batch})
	if err != nil {
		for _, i := range index {
			errs[i] = fmt.Errorf("send batch: %w", err)
		}
		return
	}
	answered := make(map[string]bool, len(batch))
	for _, ok := range out.Successful {
		answered[aws.ToString(ok.Id)] = true
	}
	for _, f := range out.Failed {
		id := aws.ToString(f.Id)
		i, err := strconv.Atoi(id)
		if err != nil || i < 0 || i >= len(errs) {
			continue
		}
		answered[id] = true
		ferr := fmt.Errorf("sqs refused message: %s: %s", aws.ToString(f.Code), aws.ToString(f.Message))
		if f.SenderFault {
			ferr = outbox.Permanent(ferr)
		}
		errs[i] = ferr
	}
	for _, i := range index {
		if !answered[strconv.Itoa(i)] {
			errs[i] = fmt.Errorf("sqs returned no result for entry %d", i)
		}
	}
}
