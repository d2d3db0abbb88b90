package sdkhttp_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/sdkhttp"
)

// sdkBody is the SDK's request body, as the SDK the module pins builds it
// (TestSDK_ClosesItsBodyAfterTheAnswerAndItsWriteToThenSaysEOF checks
// that): a reader net/http does not know as in-memory, whose WriteTo and
// Read return io.EOF once closed. The answer wins the race every time
// here: past its last byte, a read or WriteTo waits for the close, which
// comes after the answer.
type sdkBody struct {
	r      *bytes.Reader
	once   sync.Once
	closed chan struct{}
}

func newSDKBody(b []byte) *sdkBody {
	return &sdkBody{r: bytes.NewReader(b), closed: make(chan struct{})}
}

func (b *sdkBody) Read(p []byte) (int, error) {
	if b.r.Len() == 0 {
		<-b.closed
		return 0, io.EOF
	}
	return b.r.Read(p)
}

func (b *sdkBody) WriteTo(w io.Writer) (int64, error) {
	if b.r.Len() == 0 {
		<-b.closed
		return 0, io.EOF
	}
	return b.r.WriteTo(w)
}

func (b *sdkBody) Close() error {
	b.once.Do(func() { close(b.closed) })
	return nil
}

func TestClient_ARequestTheServerAnsweredIsNotFailedByTheSDKsClosedBody(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		wrap      func(aws.HTTPClient) aws.HTTPClient
		writeFail bool
	}{
		// The control: without the wrapper, net/http's check past the
		// body fails, so the test can tell the two apart.
		{"the SDK's body as it is fails the write and drops the connection", func(c aws.HTTPClient) aws.HTTPClient { return c }, true},
		{"a body that only reads ends the write cleanly and keeps the connection", sdkhttp.Client, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			conns := 0
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				_, _ = w.Write([]byte(`{}`))
			}))
			srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
				if s == http.StateNew {
					mu.Lock()
					conns++
					mu.Unlock()
				}
			}
			srv.Start()
			t.Cleanup(srv.Close)
			client := tc.wrap(&http.Client{Transport: &http.Transport{}})

			for range 2 {
				var wrote error
				trace := &httptrace.ClientTrace{WroteRequest: func(i httptrace.WroteRequestInfo) { wrote = i.Err }}
				body := newSDKBody([]byte(`{"TableName":"outbox"}`))
				req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), http.MethodPost, srv.URL, body)
				require.NoError(t, err)
				req.ContentLength = int64(body.r.Len())
				resp, err := client.Do(req)
				require.NoError(t, err)
				require.NoError(t, body.Close(), "the SDK closes the body once the answer is in")
				// The write loop reports before the connection may be
				// reused: wait for it by reading the answer to its end.
				_, _ = io.Copy(io.Discard, resp.Body)
				require.NoError(t, resp.Body.Close())
				if tc.writeFail {
					require.ErrorIs(t, wrote, io.EOF)
				} else {
					require.NoError(t, wrote)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if tc.writeFail {
				require.Equal(t, 2, conns, "each failed write closed its connection")
			} else {
				require.Equal(t, 1, conns, "the connection was kept for the second request")
			}
		})
	}
}

// captureBody keeps the last request body the SDK sent.
type captureBody struct {
	next aws.HTTPClient
	body io.ReadCloser
}

func (c *captureBody) Do(req *http.Request) (*http.Response, error) {
	c.body = req.Body
	return c.next.Do(req)
}

// TestSDK_ClosesItsBodyAfterTheAnswerAndItsWriteToThenSaysEOF pins the
// premise of the package on the SDK the module uses: if a new SDK stops
// doing this, the wrapper may go.
func TestSDK_ClosesItsBodyAfterTheAnswerAndItsWriteToThenSaysEOF(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		_, _ = w.Write([]byte(`{"TableNames":[]}`))
	}))
	t.Cleanup(srv.Close)
	capture := &captureBody{next: &http.Client{}}
	db := dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(srv.URL),
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		HTTPClient:   capture,
	})
	_, err := db.ListTables(context.Background(), &dynamodb.ListTablesInput{})
	require.NoError(t, err)
	wt, ok := capture.body.(io.WriterTo)
	require.True(t, ok, "the SDK's body has WriteTo, which io.Copy prefers")
	n, err := wt.WriteTo(io.Discard)
	require.Zero(t, n)
	require.ErrorIs(t, err, io.EOF, "closed by the SDK, its WriteTo fails a copy")
}
