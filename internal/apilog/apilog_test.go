package apilog_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/apilog"
)

func TestProxy_ForwardsAndRecordsEachOperationInOrder(t *testing.T) {
	t.Parallel()
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("answer to " + r.Header.Get("X-Amz-Target")))
	}))
	defer backend.Close()
	p, err := apilog.Start(backend.URL)
	require.NoError(t, err)
	defer func() { _ = p.Close() }()

	tests := []struct{ target, want string }{
		{"DynamoDB_20120810.Query", "DynamoDB.Query"},
		{"AmazonSQS.SendMessageBatch", "SQS.SendMessageBatch"},
		{"DynamoDB_20120810.Query", "DynamoDB.Query"},
		{"", "other"},
	}
	for _, tt := range tests {
		req, err := http.NewRequest(http.MethodPost, p.URL, strings.NewReader("{}"))
		require.NoError(t, err)
		req.Header.Set("X-Amz-Target", tt.target)
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body := make([]byte, 64)
		n, _ := res.Body.Read(body)
		_ = res.Body.Close()
		require.Equal(t, "answer to "+tt.target, string(body[:n]), "forwarded")
	}
	require.Equal(t, []string{"DynamoDB.Query", "SQS.SendMessageBatch", "DynamoDB.Query", "other"}, p.Ops())
	require.Equal(t, map[string]int{"DynamoDB.Query": 2, "SQS.SendMessageBatch": 1, "other": 1}, p.Counts())
	p.Reset()
	require.Empty(t, p.Ops())
}
