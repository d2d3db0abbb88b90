package delivery

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go/middleware"

	"github.com/outflowhq/outflow/internal/outbox"
	"github.com/outflowhq/outflow/internal/target"
)

// MaxBatchEntries is the most entries in one SendMessageBatch,
// PublishBatch or PutEvents.
const MaxBatchEntries = 10

// part is one row's entry in a batch request: the request entry, the
// row's index in the rows given to Deliver (also the entry's id), and the
// entry's size as the target counts it toward the request's limit.
type part[E any] struct {
	entry E
	row   int
	size  int
}

// id is the entry id a part is sent under: its row's index.
func (p part[E]) id() string { return strconv.Itoa(p.row) }

// messageParts builds each row's message for a queue or topic, as entry
// makes it, and gives a permanent error to a row that cannot be one or is
// over the limit (target.SizeLimit's).
func messageParts[E any](rows []outbox.Row, fifo bool, limit int, whose string, errs []error, entry func(id string, m target.Message, row outbox.Row) E) []part[E] {
	var parts []part[E]
	for i, row := range rows {
		m, err := target.NewMessage(row, fifo)
		if err == nil {
			err = m.Fits(limit, whose)
		}
		if err != nil {
			errs[i] = outbox.Permanent(err)
			continue
		}
		m = m.MarkRedriven(row, limit)
		p := part[E]{row: i, size: m.Size}
		p.entry = entry(p.id(), m, row)
		parts = append(parts, p)
	}
	return parts
}

// entries is a batch's request entries.
func entries[E any](batch []part[E]) []E {
	out := make([]E, len(batch))
	for i, p := range batch {
		out[i] = p.entry
	}
	return out
}

// inBatches sends parts, in order, in requests of at most MaxBatchEntries
// entries and maxBytes bytes. Every part is at most maxBytes on its own.
// Before each request it leaves out the rows the engine's fence says may
// no longer be sent (outbox.MaySend), with outbox.ErrLeaseEnding: a row
// whose lease would end before the request could.
func inBatches[E any](ctx context.Context, rows []outbox.Row, parts []part[E], maxBytes int, errs []error, send func([]part[E])) {
	flush := func(batch []part[E]) {
		var fenced []part[E]
		for _, p := range batch {
			if !outbox.MaySend(ctx, rows[p.row]) {
				errs[p.row] = outbox.ErrLeaseEnding
				continue
			}
			fenced = append(fenced, p)
		}
		if len(fenced) > 0 {
			send(fenced)
		}
	}
	var batch []part[E]
	bytes := 0
	for _, p := range parts {
		if len(batch) == MaxBatchEntries || bytes+p.size > maxBytes {
			flush(batch)
			batch, bytes = nil, 0
		}
		batch, bytes = append(batch, p), bytes+p.size
	}
	if len(batch) > 0 {
		flush(batch)
	}
}

// answers records a batch request's per-entry outcome, keyed by entry id:
// nil for an accepted entry, the error for a refused one. An entry the
// answer leaves out gets a transient error: it may or may not have been
// sent, and a retry is a duplicate at worst.
type answers map[string]error

// unsureAfterRetry turns the refusals in an answer to a call the SDK sent
// more than once (md: the output's ResultMetadata) into failures of
// unknown outcome. The answer is the last try's: an earlier try may have
// reached the service, and been stored, before it failed as a whole (a
// 5xx, a reset connection). Only a refusal of the message itself
// (permanent: the same content is refused on every try) stays definite.
func (got answers) unsureAfterRetry(md middleware.Metadata) {
	res, ok := retry.GetAttemptResults(md)
	if !ok || len(res.Results) <= 1 {
		return
	}
	for id, err := range got {
		var refused *outbox.RefusedError
		if err != nil && !outbox.IsPermanent(err) && errors.As(err, &refused) {
			got[id] = fmt.Errorf("%w (the answer to try %d of the call: an earlier try may have stored it)", refused.Err, len(res.Results))
		}
	}
}

// apply writes each part's outcome into errs.
func applyAnswers[E any](errs []error, batch []part[E], got answers, target string) {
	for _, p := range batch {
		err, ok := got[p.id()]
		if !ok {
			err = fmt.Errorf("%s returned no result for entry %d", target, p.row)
		}
		errs[p.row] = err
	}
}

// failBatch gives every part of a batch the error of its failed request:
// transient, since a request that failed as a whole (throttled, denied,
// timed out) may succeed once it is retried; and not definite (see
// outbox.Definite), since a request that timed out, was cut off or failed
// on the service's side may have been stored, unless the caller made it
// definite (noDestination).
func failBatch[E any](errs []error, batch []part[E], op string, err error) {
	for _, p := range batch {
		errs[p.row] = fmt.Errorf("%s: %w", op, err)
	}
}

// noDestination makes err, the error of a request that failed as a whole,
// definite (outbox.Refused) when it is a T: the target's answer that the
// queue, topic or bus the request named does not exist. Nothing was
// stored, and nothing can land later: even were an earlier try of the
// call (an SDK retry) stored before the destination went, that copy went
// with it, and no later copy can arrive through a destination that is
// not there. So the row's history does not call its outcome unknown, and
// an ordered group under skip does not wait behind it. It stays
// transient: the destination may yet be created.
func noDestination[T error](err error) error {
	var missing T
	if errors.As(err, &missing) {
		return outbox.Refused(err)
	}
	return err
}
