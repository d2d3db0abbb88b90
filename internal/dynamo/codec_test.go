package dynamo_test

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

func TestCodec_RoundTripsEveryStatus(t *testing.T) {
	t.Parallel()
	at := time.UnixMilli(1_700_000_000_123)
	base := outbox.Row{
		Key: "k", Queue: "q", Payload: []byte("héllo"), Attributes: map[string]string{"a": "b"},
		Group: "g", NotBefore: at, Attempt: 2, CreatedAt: at, LastError: "boom",
		Errors: []outbox.AttemptError{{At: at, Attempt: 1, Message: "boom"}},
	}
	tests := []struct {
		name   string
		mutate func(*outbox.Row)
	}{
		{"pending", func(r *outbox.Row) { r.Status, r.DueAt = outbox.StatusPending, at }},
		{"claimed", func(r *outbox.Row) { r.Status, r.DueAt, r.Token, r.LeaseUntil = outbox.StatusClaimed, at, "tok", at }},
		{"failed", func(r *outbox.Row) { r.Status, r.FailedAt = outbox.StatusFailed, at }},
		{"binary payload", func(r *outbox.Row) { r.Status, r.DueAt, r.Payload = outbox.StatusPending, at, []byte{0, 0xff, 0xfe} }},
		{"no attributes", func(r *outbox.Row) { r.Status, r.DueAt, r.Attributes, r.Errors = outbox.StatusPending, at, nil, nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			row := base
			tt.mutate(&row)
			av, err := dynamo.Encode(row, 4)
			require.NoError(t, err)
			got, err := dynamo.Decode(av)
			require.NoError(t, err)
			require.Equal(t, row, got)
		})
	}
}

func TestCodec_IndexKeysFollowTheStatus(t *testing.T) {
	t.Parallel()
	pending, err := dynamo.Encode(outbox.Row{Key: "k", Queue: "q", Payload: []byte("x"), Status: outbox.StatusPending, DueAt: time.UnixMilli(5)}, 8)
	require.NoError(t, err)
	require.Equal(t, &types.AttributeValueMemberS{Value: dynamo.ShardOf("k", 8)}, pending[dynamo.AttrShard])
	require.Equal(t, &types.AttributeValueMemberN{Value: "5"}, pending[dynamo.AttrDueAt])
	require.NotContains(t, pending, dynamo.AttrDeadQueue)

	failed, err := dynamo.Encode(outbox.Row{Key: "k", Queue: "q", Payload: []byte("x"), Status: outbox.StatusFailed, FailedAt: time.UnixMilli(5)}, 8)
	require.NoError(t, err)
	require.NotContains(t, failed, dynamo.AttrShard)
	require.NotContains(t, failed, dynamo.AttrDueAt)
	require.Equal(t, &types.AttributeValueMemberS{Value: "q"}, failed[dynamo.AttrDeadQueue])
}

func TestCodec_MalformedItemsSayWhatIsWrong(t *testing.T) {
	t.Parallel()
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	n := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	valid := func() map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"pk": s("k"), "queue": s("q"), "payload": s("x"), "status": s("pending"), "attempt": n("0")}
	}
	tests := []struct {
		name   string
		mutate func(map[string]types.AttributeValue)
		want   string
	}{
		{"missing key", func(m map[string]types.AttributeValue) { delete(m, "pk") }, "missing pk"},
		{"missing queue", func(m map[string]types.AttributeValue) { delete(m, "queue") }, "missing queue"},
		{"missing payload", func(m map[string]types.AttributeValue) { delete(m, "payload") }, "missing payload"},
		{"numeric payload", func(m map[string]types.AttributeValue) { m["payload"] = n("1") }, "payload must be a string or binary"},
		{"unknown status", func(m map[string]types.AttributeValue) { m["status"] = s("sent") }, `unknown status "sent"`},
		{"attempt as string", func(m map[string]types.AttributeValue) { m["attempt"] = s("one") }, "malformed item"},
		{"attributes not a map", func(m map[string]types.AttributeValue) { m["attributes"] = s("a=b") }, "malformed item"},
		{"attribute value a list", func(m map[string]types.AttributeValue) {
			m["attributes"] = &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"a": &types.AttributeValueMemberL{}}}
		}, "malformed item"},
		{"errors not a list", func(m map[string]types.AttributeValue) { m["errors"] = s("x") }, "malformed item"},
	}
	_, err := dynamo.Decode(valid())
	require.NoError(t, err)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := valid()
			tt.mutate(m)
			_, err := dynamo.Decode(m)
			require.ErrorIs(t, err, dynamo.ErrMalformed)
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestShardOf_IsStableAndInRange(t *testing.T) {
	t.Parallel()
	require.Equal(t, dynamo.ShardOf("order-42", 16), dynamo.ShardOf("order-42", 16))
	seen := map[string]bool{}
	for i := range 1000 {
		seen[dynamo.ShardOf(string(rune('a'+i%26))+string(rune(i)), 4)] = true
	}
	require.Equal(t, map[string]bool{"0": true, "1": true, "2": true, "3": true}, seen)
	require.Equal(t, "0", dynamo.ShardOf("anything", 1))
}

func TestDecode_ReadsTheStateAsTheConditionsDoWhenAttributesAreOff(t *testing.T) {
	t.Parallel()
	item := map[string]types.AttributeValue{
		"pk": s("k"), "queue": s("q"), "payload": s("x"), "status": s("claimed"),
		"attempt":     &types.AttributeValueMemberN{Value: "2.5"},
		"lease_until": &types.AttributeValueMemberN{Value: "1500.5"},
		"due_at":      n(1000),
		"created_at":  s("yesterday"),
	}
	// Decoded again and again, it gives the same error and the same
	// state: the attributes are read one by one, in a fixed order.
	for range 50 {
		row, err := dynamo.Decode(item)
		require.ErrorIs(t, err, dynamo.ErrMalformed)
		require.ErrorContains(t, err, "created_at must be a number, got S")
		require.Equal(t, outbox.StatusClaimed, row.Status)
		require.Equal(t, 3, row.Attempt, "a fraction counts as the next attempt")
		require.Equal(t, time.UnixMilli(1500), row.LeaseUntil)
		require.Equal(t, time.UnixMilli(1000), row.DueAt)
		require.Equal(t, "k", row.Key)
	}
}
