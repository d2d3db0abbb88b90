package awstest

import (
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
)

// LostAnswer is a transport to the moto server that loses the answer to
// one call of one DynamoDB operation it carries: the server acted on it,
// and the client sees a reset connection, which the SDK retries.
type LostAnswer struct {
	// Op is the operation whose answer is lost, e.g. "CreateTable".
	Op string
	// nth is the call of Op whose answer is lost, from 1.
	nth   int64
	calls atomic.Int64
	next  http.RoundTripper
	lost  atomic.Bool
}

// LoseFirstAnswer returns a LostAnswer for op's first call over the
// default transport.
func LoseFirstAnswer(op string) *LostAnswer { return LoseAnswer(op, 1) }

// LoseAnswer returns a LostAnswer for op's nth call (from 1) over the
// default transport.
func LoseAnswer(op string, nth int) *LostAnswer {
	return &LostAnswer{Op: op, nth: int64(nth), next: http.DefaultTransport}
}

// Lost reports whether an answer was lost.
func (l *LostAnswer) Lost() bool { return l.lost.Load() }

// RoundTrip implements http.RoundTripper.
func (l *LostAnswer) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(req)
	if err == nil && strings.HasSuffix(req.Header.Get("X-Amz-Target"), "."+l.Op) && l.calls.Add(1) == l.nth {
		l.lost.Store(true)
		_ = resp.Body.Close()
		return nil, errors.New("read: connection reset by peer")
	}
	return resp, err
}
