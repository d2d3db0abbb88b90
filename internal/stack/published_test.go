package stack_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/eventfilter"
	"github.com/outflowhq/outflow/internal/handler"
	"github.com/outflowhq/outflow/internal/stack"
)

// A row with no route, and a row of an ordered route with no place, are
// each one too many: their alarms fire on the first.
func TestTemplate_UnroutedAndUnplacedRowsAlarmsFireOnAnyRow(t *testing.T) {
	t.Parallel()
	tpl := load(t, nil)
	for alarmName, metric := range map[string]string{"UnroutedRowsAlarm": "UnroutedRows", "UnplacedRowsAlarm": "UnplacedRows"} {
		t.Run(alarmName, func(t *testing.T) {
			t.Parallel()
			a := alarm(t, tpl, alarmName)
			dims := map[string]string{}
			for _, d := range a.Dimensions {
				dims[d.Name] = d.Value
			}
			requireEmitted(t, alarmName, a.Namespace, a.MetricName, dims)
			require.Equal(t, metric, a.MetricName)
			require.Equal(t, "Sum", a.Statistic)
			require.Equal(t, "GreaterThanThreshold", a.ComparisonOperator)
			require.Zero(t, a.Threshold, "one such row is one too many")
			require.Equal(t, 1, a.EvaluationPeriods)
			require.Equal(t, "notBreaching", a.TreatMissingData, "no invocation, no such row")
		})
	}
}

// streamImage is an item as a stream record's NewImage carries it, in
// the JSON the filter reads.
func streamImage(t *testing.T, item map[string]types.AttributeValue) map[string]any {
	t.Helper()
	out := map[string]any{}
	for k, v := range item {
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			out[k] = map[string]any{"S": v.Value}
		case *types.AttributeValueMemberN:
			out[k] = map[string]any{"N": v.Value}
		case *types.AttributeValueMemberM:
			out[k] = map[string]any{"M": streamImage(t, v.Value)}
		default:
			require.Failf(t, "unexpected attribute type", "%s: %T", k, v)
		}
	}
	return out
}

// The published configuration is an item of the outbox table, so its
// INSERT is on the table's stream: the template's filter keeps it from
// the wake, and the wake would leave it alone if it did not.
func TestTemplate_WakeFilterAndWakeIgnoreThePublishedConfiguration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	table := awstest.NewTable(t)
	db := awstest.DynamoDB(t)
	_, err := dynamo.Publish(ctx, db, table, dynamo.Published{
		Routes:  map[string]string{"orders": "https://sqs.us-east-1.amazonaws.com/123456789012/orders", "events.fifo": "https://sqs.us-east-1.amazonaws.com/123456789012/events.fifo"},
		Ordered: map[string]string{"events.fifo": "block"}, Shards: 4, MaxMessageBytes: 262144,
	}, "test", time.Now())
	require.NoError(t, err)
	got, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table),
		Key: map[string]types.AttributeValue{dynamo.AttrKey: &types.AttributeValueMemberS{Value: dynamo.ConfigKey}}})
	require.NoError(t, err)
	require.NotNil(t, got.Item)

	raw, err := json.Marshal(map[string]any{"eventID": "1", "eventName": "INSERT", "dynamodb": map[string]any{
		"Keys": map[string]any{dynamo.AttrKey: map[string]any{"S": dynamo.ConfigKey}}, "NewImage": streamImage(t, got.Item)}})
	require.NoError(t, err)

	var ev stack.StreamEvent
	require.NoError(t, function(t, load(t, nil), "WakeFunction").Event("DynamoDB", &ev))
	var record map[string]any
	require.NoError(t, json.Unmarshal(raw, &record))
	for _, f := range ev.FilterCriteria.Filters {
		p, err := eventfilter.Compile(f.Pattern)
		require.NoError(t, err)
		require.False(t, p.Match(record), "the filter %s passes the configuration's INSERT to the wake", f.Pattern)
	}

	var rec events.DynamoDBEventRecord
	require.NoError(t, json.Unmarshal(raw, &rec))
	refs, ignored := handler.DueInserts(events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{rec}}, time.Now())
	require.Empty(t, refs, "the wake would try to deliver the configuration")
	require.Len(t, ignored, 1)
}

// The functions publish their configuration with a PutItem, granted on
// that one item only: a role that could put any item could overwrite rows.
func TestTemplate_RolesMayPutOnlyThePublishedConfiguration(t *testing.T) {
	t.Parallel()
	tpl := load(t, nil)
	for _, role := range []string{"SweepRole", "WakeRole"} {
		var r struct {
			Policies []struct {
				PolicyDocument struct{ Statement []map[string]any }
			}
		}
		require.NoError(t, tpl.Resources[role].Decode(&r))
		var puts []map[string]any
		for _, p := range r.Policies {
			for _, s := range p.PolicyDocument.Statement {
				if slices.Contains(list(s["Action"]), "dynamodb:PutItem") {
					puts = append(puts, s)
				}
			}
		}
		require.Len(t, puts, 1, "%s: one statement grants PutItem", role)
		require.Equal(t, []string{"dynamodb:PutItem"}, list(puts[0]["Action"]), role)
		require.Equal(t, []string{"${OutboxTable.Arn}"}, list(puts[0]["Resource"]), role)
		cond, err := json.Marshal(puts[0]["Condition"])
		require.NoError(t, err)
		require.JSONEq(t, `{"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": ["`+dynamo.ConfigKey+`"]}}`, string(cond), role)
	}
}
