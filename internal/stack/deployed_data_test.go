package stack_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
)

func describeTable(name string) *dynamodb.DescribeTableInput {
	return &dynamodb.DescribeTableInput{TableName: aws.String(name)}
}

func queueAttributes(t *testing.T, client *sqs.Client, url string) map[string]string {
	t.Helper()
	out, err := client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll},
	})
	require.NoError(t, err, url)
	return out.Attributes
}

// schema is the Go schema the deployed table must match: dynamo.Table, or
// its due index without links when DueIndexProjection keeps the index of
// a stack deployed before ordered groups.
func (d *deployment) schema(t *testing.T) dynamo.Schema {
	t.Helper()
	p, ok := d.tpl.Parameters["DueIndexProjection"]
	require.True(t, ok, "the template has DueIndexProjection")
	if p.Value == "created_at,queue" {
		return dynamo.Table.WithoutLinks()
	}
	require.Equal(t, "created_at,queue,prev,seq", p.Value)
	return dynamo.Table
}

// checkTable reads the deployed table: keys, indexes and stream against the
// Go schema (dynamo.Table, the one schema value), billing, encryption,
// deletion protection, TTL and point in time recovery against the
// translation.
func (d *deployment) checkTable(t *testing.T) {
	ctx := context.Background()
	ddb := awstest.DynamoDB(t)
	tables := d.tpl.OfType("AWS::DynamoDB::Table")
	require.Len(t, tables, 1)
	tb, err := d.tpl.Table(tables[0])
	require.NoError(t, err)
	name := d.ids[tables[0]]

	out, err := ddb.DescribeTable(ctx, describeTable(name))
	require.NoError(t, err)
	got := out.Table
	want := d.schema(t).CreateTableInput(name)
	require.Equal(t, want.KeySchema, got.KeySchema)
	require.ElementsMatch(t, want.AttributeDefinitions, got.AttributeDefinitions)
	require.Len(t, got.GlobalSecondaryIndexes, len(want.GlobalSecondaryIndexes))
	for _, w := range want.GlobalSecondaryIndexes {
		var g *types.GlobalSecondaryIndexDescription
		for i := range got.GlobalSecondaryIndexes {
			if aws.ToString(got.GlobalSecondaryIndexes[i].IndexName) == aws.ToString(w.IndexName) {
				g = &got.GlobalSecondaryIndexes[i]
			}
		}
		require.NotNil(t, g, "index %s", aws.ToString(w.IndexName))
		require.Equal(t, w.KeySchema, g.KeySchema, aws.ToString(w.IndexName))
		require.Equal(t, w.Projection.ProjectionType, g.Projection.ProjectionType, aws.ToString(w.IndexName))
		require.ElementsMatch(t, w.Projection.NonKeyAttributes, g.Projection.NonKeyAttributes, aws.ToString(w.IndexName))
	}
	require.NotNil(t, got.StreamSpecification)
	require.True(t, aws.ToBool(got.StreamSpecification.StreamEnabled))
	require.Equal(t, want.StreamSpecification.StreamViewType, got.StreamSpecification.StreamViewType)
	require.NotEmpty(t, got.LatestStreamArn)

	require.NotNil(t, got.BillingModeSummary)
	require.Equal(t, tb.BillingMode, string(got.BillingModeSummary.BillingMode))

	// Partly circular from here on: moto's CloudFormation drops a table's
	// encryption, TTL and point-in-time recovery, so
	// internal/moto/cloudformation.py sets them from the template's own
	// properties, and these read back what it set. They prove the
	// properties are the API's and reach the deployed table; the authority
	// on their values is TestTemplate_TableMatchesTheGoSchema.
	require.True(t, tb.SSESpecification.SSEEnabled, "the template encrypts the table")
	require.NotNil(t, got.SSEDescription, "encrypted at rest")
	require.Equal(t, types.SSEStatusEnabled, got.SSEDescription.Status)
	require.Equal(t, tb.DeletionProtectionEnabled, aws.ToBool(got.DeletionProtectionEnabled), "deletion protection as TableDeletionProtection says")

	ttl, err := ddb.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(name)})
	require.NoError(t, err)
	require.True(t, tb.TimeToLiveSpecification.Enabled)
	require.Equal(t, types.TimeToLiveStatusEnabled, ttl.TimeToLiveDescription.TimeToLiveStatus)
	require.Equal(t, dynamo.Table.TTLAttribute, aws.ToString(ttl.TimeToLiveDescription.AttributeName))
	require.Equal(t, tb.TimeToLiveSpecification.AttributeName, aws.ToString(ttl.TimeToLiveDescription.AttributeName))

	backups, err := ddb.DescribeContinuousBackups(ctx, &dynamodb.DescribeContinuousBackupsInput{TableName: aws.String(name)})
	require.NoError(t, err)
	require.True(t, tb.PointInTimeRecoverySpecification.PointInTimeRecoveryEnabled)
	require.Equal(t, types.PointInTimeRecoveryStatusEnabled,
		backups.ContinuousBackupsDescription.PointInTimeRecoveryDescription.PointInTimeRecoveryStatus)
}

// checkQueues reads each queue's encryption, type, retention and redrive
// policy: the dead-letter target must be the deployed DLQ the template
// names.
func (d *deployment) checkQueues(t *testing.T) {
	queues, err := d.tpl.Queues()
	require.NoError(t, err)
	require.NotEmpty(t, queues)
	client := awstest.SQS(t)
	for name, q := range queues {
		url := d.ids[name]
		attrs := queueAttributes(t, client, url)
		require.Equal(t, fmt.Sprint(q.SqsManagedSseEnabled), attrs["SqsManagedSseEnabled"], name)
		require.Equal(t, q.FifoQueue, attrs["FifoQueue"] == "true", name)
		require.Equal(t, q.FifoQueue, strings.HasSuffix(url, ".fifo"), "%s: a FIFO queue's generated name ends in .fifo", name)
		if q.MessageRetentionPeriod != 0 {
			require.Equal(t, fmt.Sprint(q.MessageRetentionPeriod), attrs["MessageRetentionPeriod"], name)
		}
		if q.RedrivePolicy == nil {
			require.Empty(t, attrs["RedrivePolicy"], name)
			continue
		}
		var rp struct {
			DeadLetterTargetArn string `json:"deadLetterTargetArn"`
			MaxReceiveCount     int    `json:"maxReceiveCount"`
		}
		require.NoError(t, json.Unmarshal([]byte(attrs["RedrivePolicy"]), &rp), name)
		require.Equal(t, d.sub(t, q.RedrivePolicy.DeadLetterTargetArn), rp.DeadLetterTargetArn, name)
		require.Equal(t, q.RedrivePolicy.MaxReceiveCount, rp.MaxReceiveCount, name)
	}
}

// checkRetain deletes the stack: what has DeletionPolicy and
// UpdateReplacePolicy Retain survives it (the table, and with KmsKeyArn
// the bus's dead-letter queue, the only copy of the events it holds), the
// other queues, the topic and the bus go.
func (d *deployment) checkRetain(t *testing.T) {
	ctx := context.Background()
	var tables []string
	retained := map[string]bool{}
	for name, r := range asMap(d.raw["Resources"]) {
		res := asMap(r)
		if res["DeletionPolicy"] == "Retain" {
			require.Equal(t, "Retain", res["UpdateReplacePolicy"], "%s: a replacement keeps the old resource too", name)
			retained[name] = true
		}
		if res["Type"] != "AWS::DynamoDB::Table" {
			continue
		}
		require.True(t, retained[name], "%s: a replacement keeps the old table and its rows", name)
		tables = append(tables, d.ids[name])
	}
	require.NotEmpty(t, tables)
	require.True(t, retained["DomainBusDLQ"], "the bus's dead-letter queue (with KmsKeyArn) is retained")
	ddb := awstest.DynamoDB(t)
	t.Cleanup(func() {
		for _, name := range tables {
			// Deletion protection (TableDeletionProtection) first.
			_, _ = ddb.UpdateTable(context.Background(), &dynamodb.UpdateTableInput{TableName: aws.String(name), DeletionProtectionEnabled: aws.Bool(false)})
			_, _ = ddb.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
		}
	})
	cf := cloudformation.NewFromConfig(d.cfg)
	_, err := cf.DeleteStack(ctx, &cloudformation.DeleteStackInput{StackName: aws.String(d.name)})
	require.NoError(t, err)
	waiter := cloudformation.NewStackDeleteCompleteWaiter(cf, func(o *cloudformation.StackDeleteCompleteWaiterOptions) {
		o.MinDelay, o.MaxDelay = 200*time.Millisecond, 2*time.Second
	})
	require.NoError(t, waiter.Wait(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(d.name)}, 2*time.Minute))

	for _, name := range tables {
		_, err := ddb.DescribeTable(ctx, describeTable(name))
		require.NoError(t, err, "%s survives its stack", name)
	}
	queues, err := d.tpl.Queues()
	require.NoError(t, err)
	sqsc := awstest.SQS(t)
	for name := range queues {
		_, err := sqsc.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(d.ids[name])})
		if retained[name] {
			require.NoError(t, err, "%s survives its stack", name)
			_, _ = sqsc.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(d.ids[name])})
			continue
		}
		require.Error(t, err, "%s is deleted with its stack", name)
	}
	for _, name := range d.tpl.OfType("AWS::SNS::Topic") {
		_, err := sns.NewFromConfig(d.cfg).GetTopicAttributes(ctx, &sns.GetTopicAttributesInput{TopicArn: aws.String(d.ids[name])})
		require.Error(t, err, "%s is deleted with its stack", name)
	}
	for _, name := range d.tpl.OfType("AWS::Events::EventBus") {
		_, err := eventbridge.NewFromConfig(d.cfg).DescribeEventBus(ctx, &eventbridge.DescribeEventBusInput{Name: aws.String(d.ids[name])})
		require.Error(t, err, "%s is deleted with its stack", name)
	}
}
