package consume_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/consume"
	"github.com/outflowhq/outflow/internal/awstest"
)

// overlapWriter is an io.Writer, like a bytes.Buffer, that is not safe
// for concurrent use: it notes when a Write starts while another is in
// progress.
type overlapWriter struct {
	writing, overlapped atomic.Bool
	mu                  sync.Mutex // guards buf only, for the test's read
	buf                 bytes.Buffer
}

func (w *overlapWriter) Write(p []byte) (int, error) {
	if !w.writing.CompareAndSwap(false, true) {
		w.overlapped.Store(true)
	}
	time.Sleep(500 * time.Millisecond) // a slow sink: a file, a pipe
	w.mu.Lock()
	w.buf.Write(p)
	w.mu.Unlock()
	w.writing.Store(false)
	return len(p), nil
}

// Review of issue 51, adopted: a Poller applies its groups concurrently,
// and a closing message that meets no Closed hook is counted by an EMF
// line written to Metrics from the group's goroutine. Two groups' lines
// were written to the user's io.Writer at once (a data race on a
// bytes.Buffer); Metrics, the Logger and OnFailure are now called one at
// a time, as OnResult is, and as Python's Poller calls its sinks.
func TestAdv51_PollerWritesToMetricsOneLineAtATime(t *testing.T) {
	t.Parallel()
	url := awstest.NewQueue(t, true)
	api := awstest.SQS(t)
	for _, g := range []string{"a", "b"} {
		sendScenarioMessage(t, api, url, true, pollerMessage{Key: "closes-" + g, Group: g, Seq: 1, Closed: "purged"})
	}
	metrics := &overlapWriter{}
	var mu sync.Mutex
	var counts consume.Counts
	both := make(chan struct{})
	p := &consume.Poller{API: api, QueueURL: url, Wait: time.Second, Visibility: 30 * time.Second, Concurrency: 2,
		Logger: slog.New(slog.DiscardHandler), Metrics: metrics,
		Apply: func(context.Context, consume.Message) error { return nil },
		OnResult: func(ctx context.Context, r consume.Result) {
			mu.Lock()
			defer mu.Unlock()
			counts.Add(ctx, r)
			if counts.Failed == 2 {
				close(both)
			}
		}}
	stop := runPoller(t, p)
	select {
	case <-both:
	case <-time.After(2 * time.Minute):
		t.Fatal("the two closing messages were not both failed")
	}
	require.NoError(t, stop())
	metrics.mu.Lock()
	lines := strings.Count(metrics.buf.String(), consume.MetricNoClosedHook+`":1`)
	metrics.mu.Unlock()
	require.Equal(t, 2, lines, "one line per closing message")
	require.False(t, metrics.overlapped.Load(), "two groups wrote to Metrics at once")
}
