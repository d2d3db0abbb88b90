package dynamo_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
)

// lostCreate is a transport to the moto server that loses the response to
// the first CreateTable it carries: the server made the table, and the
// client sees a reset connection, which the SDK retries.
type lostCreate struct {
	next http.RoundTripper
	lost atomic.Bool
}

func (l *lostCreate) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(req)
	if err == nil && strings.HasSuffix(req.Header.Get("X-Amz-Target"), ".CreateTable") && l.lost.CompareAndSwap(false, true) {
		_ = resp.Body.Close()
		return nil, errors.New("read: connection reset by peer")
	}
	return resp, err
}

func TestCreateTable_SurvivesARetryOfACreateWhoseResponseWasLost(t *testing.T) {
	t.Parallel()
	cfg := awstest.TestConfig(t)
	transport := &lostCreate{next: http.DefaultTransport}
	cfg.HTTPClient = &http.Client{Transport: transport}
	client := dynamodb.NewFromConfig(cfg)
	name := awstest.UniqueName("outflow-create")
	t.Cleanup(func() { _ = dynamo.DeleteTable(context.Background(), client, name) })

	require.NoError(t, dynamo.CreateTable(context.Background(), client, name))
	require.True(t, transport.lost.Load(), "the first response was lost")
	out, err := client.DescribeTable(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String(name)})
	require.NoError(t, err)
	require.Equal(t, types.TableStatusActive, out.Table.TableStatus)
}

func TestCreateTable_RefusesANameAlreadyTaken(t *testing.T) {
	t.Parallel()
	client := awstest.DynamoDB(t)
	name := awstest.NewTable(t)
	err := dynamo.CreateTable(context.Background(), client, name)
	var inUse *types.ResourceInUseException
	require.ErrorAs(t, err, &inUse)
}
