// Package apilog records the AWS API calls a process makes, in order, by
// standing between it and the endpoint as a reverse proxy: it sees the
// requests of a child process (the outflow CLI run by the benchmark, say)
// where an SDK middleware could not.
package apilog

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
)

// Proxy forwards every request to its target and records its operation.
type Proxy struct {
	// URL is the proxy's address, to give as the endpoint.
	URL string

	srv *http.Server
	mu  sync.Mutex
	ops []string
}

// Start listens on a free loopback port and forwards to target.
func Start(target string) (*Proxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("parse target %q: %w", target, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	p := &Proxy{URL: "http://" + ln.Addr().String()}
	rp := httputil.NewSingleHostReverseProxy(u)
	p.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.ops = append(p.ops, Operation(r))
		p.mu.Unlock()
		rp.ServeHTTP(w, r)
	})}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// Operation names a request "Service.Operation" from its X-Amz-Target
// header (the JSON protocol of DynamoDB and SQS), e.g. "DynamoDB.Query";
// "other" for a request without one.
func Operation(r *http.Request) string {
	target := r.Header.Get("X-Amz-Target")
	service, op, ok := strings.Cut(target, ".")
	if !ok {
		return "other"
	}
	switch {
	case strings.HasPrefix(service, "DynamoDB"):
		service = "DynamoDB"
	case service == "AmazonSQS":
		service = "SQS"
	}
	return service + "." + op
}

// Ops returns the operations recorded so far, in the order they came.
func (p *Proxy) Ops() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.ops...)
}

// Counts returns how many requests of each operation came.
func (p *Proxy) Counts() map[string]int {
	out := map[string]int{}
	for _, op := range p.Ops() {
		out[op]++
	}
	return out
}

// Reset forgets what was recorded.
func (p *Proxy) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ops = nil
}

// Close stops the proxy.
func (p *Proxy) Close() error { return p.srv.Close() }
