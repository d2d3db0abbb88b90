package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/outflowhq/outflow/internal/handler"
)

// errQueueFull is what an asynchronous invoke gets when the local queue
// holds as many events as it takes: Lambda's throttle.
var errQueueFull = errors.New("local async queue full")

// asyncEvent is one queued asynchronous invocation.
type asyncEvent struct {
	payload []byte
	queued  time.Time
}

// asyncQueue is Lambda's asynchronous invocation of the sweep, locally: an
// invoke queues the event and returns at once, and the runner's partition
// workers (each an instance of the sweep of its own) take the events in
// turn. Events older than the function's MaximumEventAgeInSeconds are
// dropped unrun, as its EventInvokeConfig says; none is retried. It is the
// handler's Invoker in process, and serves Lambda's Invoke API to the
// bootstraps under the emulator.
type asyncQueue struct {
	// function is the name invokes must use (AWS_LAMBDA_FUNCTION_NAME of
	// the emulated sweep).
	function string
	maxAge   time.Duration
	events   chan asyncEvent
}

func newAsyncQueue(function string, size int, maxAge time.Duration) *asyncQueue {
	return &asyncQueue{function: function, maxAge: maxAge, events: make(chan asyncEvent, size)}
}

func (q *asyncQueue) enqueue(payload []byte) error {
	select {
	case q.events <- asyncEvent{payload: payload, queued: time.Now()}:
		return nil
	default:
		return errQueueFull
	}
}

// Invoke implements handler.Invoker: it queues the partition's event.
func (q *asyncQueue) Invoke(_ context.Context, ev handler.PartitionEvent) error {
	p := ev.Partition
	payload, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encode partition %s: %w", p, err)
	}
	if err := q.enqueue(payload); err != nil {
		return fmt.Errorf("invoke sweep for partition %s: %w", p, err)
	}
	return nil
}

// ServeHTTP answers Lambda's Invoke API (POST
// /2015-03-31/functions/{name}/invocations) for asynchronous invokes of the
// sweep, the only kind the fan-out makes: 202 once queued, with Lambda's
// error types otherwise, so the bootstrap's SDK reads them as it would
// Lambda's.
func (q *asyncQueue) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	fail := func(status int, typ, msg string) {
		w.Header().Set("X-Amzn-Errortype", typ)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]string{"Type": "User", "message": msg})
	}
	if name := req.PathValue("name"); name != q.function {
		fail(http.StatusNotFound, "ResourceNotFoundException", "Function not found: "+name)
		return
	}
	if t := req.Header.Get("X-Amz-Invocation-Type"); t != "Event" {
		fail(http.StatusBadRequest, "InvalidParameterValueException", "the local runner serves asynchronous (Event) invokes only, got "+t)
		return
	}
	payload, err := io.ReadAll(io.LimitReader(req.Body, 256*1024+1))
	if err != nil || len(payload) > 256*1024 {
		fail(http.StatusRequestEntityTooLarge, "RequestTooLargeException", "an asynchronous payload is at most 256 KB")
		return
	}
	if err := q.enqueue(payload); err != nil {
		fail(http.StatusTooManyRequests, "TooManyRequestsException", err.Error())
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// invokePath is the route ServeHTTP answers.
const invokePath = "POST /2015-03-31/functions/{name}/invocations"
