// Package sdkhttp wraps the AWS SDK's HTTP client so that a request the
// server has answered is never sent again because of the SDK's own body.
//
// The SDK hands net/http a request body that is not one of the in-memory
// readers net/http knows, so net/http flushes the headers, then copies
// the body straight to the socket, and only then copies what is left of
// it, through its WriteTo, to check for bytes past its Content-Length.
// The server answers as soon as the last byte is in. The SDK closes the
// body as soon as the answer arrives, and its closed body's WriteTo
// returns (0, io.EOF), which io.Copy reports as an error. When the answer
// wins that race (a loaded machine delays net/http's writer), the
// transport takes the check's error for a failed write and closes the
// connection under the response being read; the read fails with
// net.ErrClosed, which the SDK retries by default, and a request the
// server applied runs again: a second SendMessage on a standard queue, a
// ReceiveMessage whose first copy hid the message it took, a conditional
// write refused by its own first copy. A trace of two test suites at once
// showed each step: the response's first byte, the SDK's close, the check's
// io.EOF, the connection closed by net/http's write loop, the retry.
//
// Hiding WriteTo makes the check read instead, and a closed body's Read
// returns io.EOF, which ends a copy cleanly.
package sdkhttp

import (
	"io"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
)

// Client returns next (the SDK's default client when nil) with request
// bodies that expose only Read and Close. Set it as aws.Config's
// HTTPClient once the config is loaded (cfg.HTTPClient =
// Client(cfg.HTTPClient)), not through config.WithHTTPClient: the loader
// adds a custom CA bundle (AWS_CA_BUNDLE) only to its own client type,
// and refuses any other.
func Client(next aws.HTTPClient) aws.HTTPClient {
	if next == nil {
		next = awshttp.NewBuildableClient()
	}
	return readOnlyBodies{next}
}

// readOnlyBodies is a client that hides the WriteTo of request bodies.
type readOnlyBodies struct{ next aws.HTTPClient }

// Do implements aws.HTTPClient.
func (c readOnlyBodies) Do(req *http.Request) (*http.Response, error) {
	if req.Body != nil && req.Body != http.NoBody {
		if _, ok := req.Body.(io.WriterTo); ok {
			req = req.Clone(req.Context())
			req.Body = struct{ io.ReadCloser }{req.Body}
		}
	}
	return c.next.Do(req)
}
