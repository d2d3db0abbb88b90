package sdkhttp

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// closedWriterTo is the SDK's request body once closed: WriteTo says
// io.EOF, which io.Copy reports as an error.
type closedWriterTo struct{ io.Reader }

func (closedWriterTo) Close() error                     { return nil }
func (closedWriterTo) WriteTo(io.Writer) (int64, error) { return 0, io.EOF }
func (c closedWriterTo) Read(p []byte) (int, error)     { return c.Reader.Read(p) }

type capture struct{ body io.ReadCloser }

func (c *capture) RoundTrip(req *http.Request) (*http.Response, error) {
	c.body = req.Body
	return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
}

func TestClient_ACopyOfAClosedBodyEndsCleanlyInsteadOfFailing(t *testing.T) {
	t.Parallel()
	body := closedWriterTo{bytes.NewReader(nil)}
	_, err := io.Copy(io.Discard, body)
	require.ErrorIs(t, err, io.EOF, "the SDK's closed body fails a copy: net/http then closes the connection")

	c := &capture{}
	req, err := http.NewRequest(http.MethodPost, "http://127.0.0.1/", body)
	require.NoError(t, err)
	resp, err := Client(c).Transport.RoundTrip(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	_, isWriterTo := c.body.(io.WriterTo)
	require.False(t, isWriterTo)
	_, err = io.Copy(io.Discard, c.body)
	require.NoError(t, err, "read through Read, the copy ends at io.EOF cleanly")
}
