package cli_test

import (
	"bytes"
	"context"
	"net"
	"regexp"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/cli"
)

// syncBuffer is output goroutines write while the test reads it.
type syncBuffer = awstest.SyncBuffer

var exportLine = regexp.MustCompile(`export AWS_ENDPOINT_URL=(http://127\.0\.0\.1:\d+) AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1 AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test\n`)

// TestMoto_ServesTheQueuesItNamesUntilCancelled: outflow moto starts the
// server, creates each queue named (FIFO for a .fifo name), prints the
// exports a shell needs, serves until its context ends, and exits 0.
func TestMoto_ServesTheQueuesItNamesUntilCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- cli.Execute(ctx, []string{"moto", "--port", "0", "--queue", "billing-events", "--queue", "orders.fifo", "--topic", "alerts"},
			&out, &errb, func(string) string { return "" })
	}()
	var endpoint string
	require.Eventually(t, func() bool {
		m := exportLine.FindStringSubmatch(out.String())
		if m != nil {
			endpoint = m[1]
		}
		return m != nil
	}, 60*time.Second, 50*time.Millisecond, "no exports printed: %s %s", out.String(), errb.String())
	require.Contains(t, out.String(), "the patched moto server (atomic conditional writes) at "+endpoint)
	require.Contains(t, out.String(), "topic alerts")

	cfg := awstest.TestConfig(t)
	cfg.BaseEndpoint = aws.String(endpoint)
	client := sqs.NewFromConfig(cfg)
	for name, fifo := range map[string]string{"billing-events": "", "orders.fifo": "true"} {
		url, err := client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
		require.NoError(t, err, name)
		require.Contains(t, out.String(), aws.ToString(url.QueueUrl), "its URL is printed")
		attrs, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: url.QueueUrl,
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameFifoQueue}})
		require.NoError(t, err)
		require.Equal(t, fifo, attrs.Attributes[string(sqstypes.QueueAttributeNameFifoQueue)], name)
	}

	cancel()
	select {
	case code := <-done:
		require.Equal(t, cli.ExitOK, code, errb.String())
	case <-time.After(30 * time.Second):
		t.Fatal("outflow moto did not stop when its context ended")
	}
}

// TestMoto_RefusesAPortInUse: the port asked for is the one it serves on,
// so a port another process holds is an error, not another port.
func TestMoto_RefusesAPortInUse(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	var out, errb bytes.Buffer
	code := cli.Execute(context.Background(), []string{"moto", "--port", port}, &out, &errb, func(string) string { return "" })
	require.Equal(t, cli.ExitError, code)
	require.Contains(t, errb.String(), "listen on loopback port "+port)
}
