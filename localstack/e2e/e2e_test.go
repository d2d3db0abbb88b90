//go:build localstack

// Package e2e tests a stack deployed to LocalStack by localstack/deploy.sh:
// a row goes out through the real stream mapping (or the real schedule),
// and a dead letter is visible with the CLI. Run it with
// `make localstack-test`; it is not part of `make test`, which needs no
// Docker.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/stretchr/testify/assert"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow"
	"github.com/outflowhq/outflow/internal/cli"
	"github.com/outflowhq/outflow/internal/dynamo"
)

func outputs(t *testing.T, cfg aws.Config) map[string]string {
	t.Helper()
	stack := os.Getenv("OUTFLOW_STACK")
	require.NotEmpty(t, stack, "OUTFLOW_STACK names the deployed stack")
	out, err := cloudformation.NewFromConfig(cfg).DescribeStacks(context.Background(), &cloudformation.DescribeStacksInput{StackName: aws.String(stack)})
	require.NoError(t, err)
	require.Len(t, out.Stacks, 1)
	m := map[string]string{}
	for _, o := range out.Stacks[0].Outputs {
		m[aws.ToString(o.OutputKey)] = aws.ToString(o.OutputValue)
	}
	return m
}

func TestDeployedStack_DeliversAndDeadLetters(t *testing.T) {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	require.NoError(t, err)
	out := outputs(t, cfg)
	table, queue := out["TableName"], out["OrdersQueueUrl"]
	require.NotEmpty(t, table)
	require.NotEmpty(t, queue)

	p, err := outflow.NewProducer(dynamodb.NewFromConfig(cfg), outflow.Config{Table: table})
	require.NoError(t, err)
	key := "e2e-" + time.Now().Format("150405.000")
	_, err = p.Put(ctx, outflow.Row{Key: key, Queue: "orders", Payload: []byte(`{"e2e":true}`)})
	require.NoError(t, err)
	_, err = p.Put(ctx, outflow.Row{Key: key + "-lost", Queue: "nowhere", Payload: []byte("x")})
	require.NoError(t, err)

	client := sqs.NewFromConfig(cfg)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(queue), WaitTimeSeconds: 5, MessageAttributeNames: []string{"All"}})
		require.NoError(c, err)
		var keys []string
		for _, m := range got.Messages {
			keys = append(keys, aws.ToString(m.MessageAttributes["outflow.key"].StringValue))
		}
		require.Contains(c, keys, key)
	}, 3*time.Minute, time.Second, "the row reaches SQS through the stream mapping or the schedule")

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var stdout, stderr bytes.Buffer
		code := cli.Execute(ctx, []string{"dead", "list", "--queue", "nowhere", "--output", "json", "--table", table}, &stdout, &stderr, os.Getenv)
		require.Equal(c, cli.ExitOK, code, stderr.String())
		var dead []dynamo.DeadRef
		require.NoError(c, json.Unmarshal(stdout.Bytes(), &dead))
		var keys []string
		for _, d := range dead {
			keys = append(keys, d.Key)
		}
		require.Contains(c, keys, key+"-lost")
	}, 3*time.Minute, 2*time.Second, "the unroutable row is a dead letter the CLI lists")
}
