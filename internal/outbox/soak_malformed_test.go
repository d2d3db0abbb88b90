package outbox_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/dynamo"
)

// malformedShape is an item in the due index as a producer in another
// language might write it by hand, and the reason Outflow must dead-letter
// it with.
type malformedShape struct {
	name   string
	mutate func(item map[string]types.AttributeValue, now time.Time)
	reason string
}

func num(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

// malformedShapes lists every malformed shape docs/reliability.md names.
var malformedShapes = []malformedShape{
	{"no payload", func(it map[string]types.AttributeValue, _ time.Time) { delete(it, dynamo.AttrPayload) }, "malformed item: missing payload"},
	{"attempt missing", func(it map[string]types.AttributeValue, _ time.Time) { delete(it, dynamo.AttrAttempt) }, "malformed item: missing attempt"},
	{"attempt null", func(it map[string]types.AttributeValue, _ time.Time) {
		it[dynamo.AttrAttempt] = &types.AttributeValueMemberNULL{Value: true}
	}, "malformed item: attempt must be a number, got NULL"},
	{"attempt a string", func(it map[string]types.AttributeValue, _ time.Time) {
		it[dynamo.AttrAttempt] = &types.AttributeValueMemberS{Value: "0"}
	}, "malformed item: attempt must be a number, got S"},
	{"attempt negative", func(it map[string]types.AttributeValue, _ time.Time) { it[dynamo.AttrAttempt] = num(-1) }, "malformed item: attempt must be in"},
	{"status missing", func(it map[string]types.AttributeValue, _ time.Time) { delete(it, dynamo.AttrStatus) }, "malformed item: missing status"},
	{"status a number", func(it map[string]types.AttributeValue, _ time.Time) { it[dynamo.AttrStatus] = num(7) }, "malformed item: status must be a string, got N"},
	{"status unknown", func(it map[string]types.AttributeValue, _ time.Time) {
		it[dynamo.AttrStatus] = &types.AttributeValueMemberS{Value: "queued"}
	}, `malformed item: unknown status "queued"`},
	{"claimed with a string lease", func(it map[string]types.AttributeValue, _ time.Time) {
		it[dynamo.AttrStatus] = &types.AttributeValueMemberS{Value: "claimed"}
		it[dynamo.AttrLeaseUntil] = &types.AttributeValueMemberS{Value: "soon"}
	}, "malformed item: lease_until must be a number, got S"},
	{"done in the due index", func(it map[string]types.AttributeValue, _ time.Time) {
		it[dynamo.AttrStatus] = &types.AttributeValueMemberS{Value: "done"}
	}, "malformed item: done, yet still in the due index"},
	{"failed in the due index", func(it map[string]types.AttributeValue, _ time.Time) {
		it[dynamo.AttrStatus] = &types.AttributeValueMemberS{Value: "failed"}
	}, "malformed item: failed, yet still in the due index"},
	{"created_at a string", func(it map[string]types.AttributeValue, _ time.Time) {
		it[dynamo.AttrCreatedAt] = &types.AttributeValueMemberS{Value: "yesterday"}
	}, "malformed item: created_at must be a number, got S"},
	{"attempt over the largest", func(it map[string]types.AttributeValue, _ time.Time) { it[dynamo.AttrAttempt] = num(2147483648) },
		"malformed item: attempt must be in [0, 2147483647], got 2147483648"},
	{"attempt a fraction", func(it map[string]types.AttributeValue, _ time.Time) {
		it[dynamo.AttrAttempt] = &types.AttributeValueMemberN{Value: "0.5"}
		// The claim adds 1 before the decoder reads it, and a claim applied
		// but reported failed adds another, so the number shown varies.
	}, "malformed item: attempt must be a whole number, got "},
	{"claimed with a lease in microseconds", func(it map[string]types.AttributeValue, now time.Time) {
		it[dynamo.AttrStatus] = &types.AttributeValueMemberS{Value: "claimed"}
		it[dynamo.AttrLeaseUntil] = num(now.UnixMicro())
	}, "malformed item: claimed with lease_until more than 2h0m0s past now"},
	{"payload a number", func(it map[string]types.AttributeValue, _ time.Time) { it[dynamo.AttrPayload] = num(1) },
		"malformed item: payload must be a string or binary, got N"},
	{"no queue", func(it map[string]types.AttributeValue, _ time.Time) { delete(it, dynamo.AttrQueue) }, "malformed item: missing queue"},
	{"not_before a string", func(it map[string]types.AttributeValue, _ time.Time) {
		it[dynamo.AttrNotBefore] = &types.AttributeValueMemberS{Value: "later"}
	}, "malformed item: not_before must be a number, got S"},
	{"attributes a number", func(it map[string]types.AttributeValue, _ time.Time) { it[dynamo.AttrAttributes] = num(1) },
		"malformed item: attributes must be a map of strings, got N"},
	{"attributes a map of numbers", func(it map[string]types.AttributeValue, _ time.Time) {
		it[dynamo.AttrAttributes] = &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"a": num(1)}}
	}, "malformed item: attributes.a must be a string, got N"},
	{"group a number", func(it map[string]types.AttributeValue, _ time.Time) { it[dynamo.AttrGroup] = num(1) },
		"malformed item: group must be a string, got N"},
	{"seq a string", func(it map[string]types.AttributeValue, _ time.Time) {
		it[dynamo.AttrSeq] = &types.AttributeValueMemberS{Value: "2"}
	},
		"malformed item: seq must be a number, got S"},
	{"prev a number", func(it map[string]types.AttributeValue, _ time.Time) { it[dynamo.AttrPrev] = num(1) },
		"malformed item: prev must be a string, got N"},
	{"errors a string", func(it map[string]types.AttributeValue, _ time.Time) {
		it[dynamo.AttrErrors] = &types.AttributeValueMemberS{Value: "written by hand"}
	}, "malformed item: errors must be a list of {at, attempt, message}"},
}

// putMalformed writes one item of every malformed shape into the due
// index of table, due at now, keyed prefix + shape, with the SDK's raw
// PutItem and hand-built attribute values, and returns each key's expected
// dead-letter reason.
func putMalformed(t *testing.T, db *dynamodb.Client, table string, shards int, prefix string, now time.Time) map[string]string {
	t.Helper()
	want := map[string]string{}
	for i, shape := range malformedShapes {
		key := prefix + strconv.Itoa(i)
		item := map[string]types.AttributeValue{
			dynamo.AttrKey:       &types.AttributeValueMemberS{Value: key},
			dynamo.AttrQueue:     &types.AttributeValueMemberS{Value: "q1"},
			dynamo.AttrPayload:   &types.AttributeValueMemberS{Value: `{"shape":"` + shape.name + `"}`},
			dynamo.AttrStatus:    &types.AttributeValueMemberS{Value: "pending"},
			dynamo.AttrAttempt:   num(0),
			dynamo.AttrCreatedAt: num(now.UnixMilli()),
			dynamo.AttrDueAt:     num(now.UnixMilli()),
			dynamo.AttrShard:     &types.AttributeValueMemberS{Value: dynamo.ShardOf(key, shards)},
		}
		shape.mutate(item, now)
		_, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: item})
		require.NoError(t, err, shape.name)
		want[key] = shape.reason
	}
	return want
}
