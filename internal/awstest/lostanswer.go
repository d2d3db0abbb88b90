package awstest

import (
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
)

// LostAnswer is a transport to the moto server that loses the answer to
// the first call of one DynamoDB operation it carries: the server acted on
// it, and the client sees a reset connection, which the SDK retries.
type LostAnswer struct {
	// Op is the operation whose first answer is lost, e.g. "CreateTable".
	Op   string
	next http.RoundTripper
	lost atomic.Bool
}

// LoseFirstAnswer returns a LostAnswer for op over the default transport.
func LoseFirstAnswer(op string) *LostAnswer {
	return &LostAnswer{Op: op, next: http.DefaultTransport}
}

// Lost reports whether an answer was lost.
func (l *LostAnswer) Lost() bool { return l.lost.Load() }

// RoundTrip implements http.RoundTripper.
func (l *LostAnswer) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(req)
	if err == nil && strings.HasSuffix(req.Header.Get("X-Amz-Target"), "."+l.Op) && l.lost.CompareAndSwap(false, true) {
		_ = resp.Body.Close()
		return nil, errors.New("read: connection reset by peer")
	}
	return resp, err
}
