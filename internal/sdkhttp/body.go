// Package sdkhttp gives the AWS SDK an HTTP client whose requests are not
// sent twice after the server has answered them.
//
// The SDK wraps a request's body in a closer whose WriteTo returns
// (0, io.EOF) once the SDK has closed it, which it does as soon as the
// response arrives. net/http writes the body, and then, to check for
// bytes past its Content-Length, copies the rest of it, through WriteTo.
// When the answer arrives between the two (the server answers as soon
// as the last byte is in, and a loaded machine delays the writer), that
// copy fails with io.EOF, the transport closes the connection under the
// response being read, the read fails with net.ErrClosed, and the SDK
// retries a request the server has applied: a second SendMessage, a
// ReceiveMessage that hides the message it took, a conditional write
// refused by its own first copy. Hiding WriteTo makes the copy read
// instead, and a closed body's Read returns io.EOF, which ends a copy
// cleanly.
package sdkhttp

import (
	"io"
	"net/http"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
)

// Client is an HTTP client over next (the SDK's default transport when
// nil) whose request bodies expose only Read and Close.
func Client(next http.RoundTripper) *http.Client {
	if next == nil {
		next = awshttp.NewBuildableClient().GetTransport()
	}
	return &http.Client{Transport: readOnlyBodies{next}}
}

// readOnlyBodies is a transport that hides the WriteTo of request bodies.
type readOnlyBodies struct{ next http.RoundTripper }

// RoundTrip implements http.RoundTripper.
func (t readOnlyBodies) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil && req.Body != http.NoBody {
		if _, ok := req.Body.(io.WriterTo); ok {
			req = req.Clone(req.Context())
			req.Body = struct{ io.ReadCloser }{req.Body}
		}
	}
	return t.next.RoundTrip(req)
}
