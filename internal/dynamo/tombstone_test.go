package dynamo_test

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

// rawItem reads key's item as stored.
func rawItem(t *testing.T, s *dynamo.Store, key string) map[string]types.AttributeValue {
	t.Helper()
	out, err := awstest.DynamoDB(t).GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(s.Table()), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{dynamo.AttrKey: &types.AttributeValueMemberS{Value: key}}})
	require.NoError(t, err)
	return out.Item
}

// TestStore_DoneKeepsATombstoneWithoutPayloadOrAttributes settles rows
// to done under a retention, by a claim and as the wake settles a row
// it sent unclaimed: the tombstone keeps the key, the route, the state and
// the digest of the content, and neither the payload nor the attributes.
func TestStore_DoneKeepsATombstoneWithoutPayloadOrAttributes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		payload []byte
		attrs   map[string]string
		// unclaimed settles the row as the wake does, from its image.
		unclaimed bool
	}{
		{"claimed, text payload and attributes", []byte(`{"id":1}`), map[string]string{"type": "created", outbox.AttrTraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}, false},
		{"sent unclaimed by the wake", []byte(`{"id":2}`), map[string]string{"type": "created"}, true},
		{"binary payload, no attributes", []byte{0xff, 0x00, 0xfe}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := newStore(t, dynamo.DefaultDoneRetention)
			staged := outbox.Row{Key: "k", Queue: "orders", Payload: tc.payload, Attributes: tc.attrs}
			require.NoError(t, s.Stage(ctx, staged, t0))
			row := *get(t, s, "k")
			if tc.unclaimed {
				row.Unclaimed = true
			} else {
				row = claim(t, s, "k", t0)
			}
			require.NoError(t, s.Done(ctx, row, t0.Add(time.Second)))

			item := rawItem(t, s, "k")
			require.NotContains(t, item, dynamo.AttrPayload)
			require.NotContains(t, item, dynamo.AttrAttributes)
			require.Equal(t, &types.AttributeValueMemberS{Value: dynamo.ContentDigest(staged)}, item[dynamo.AttrContent])
			want := []string{dynamo.AttrKey, dynamo.AttrQueue, dynamo.AttrStatus, dynamo.AttrAttempt, dynamo.AttrCreatedAt, dynamo.AttrStageID,
				dynamo.AttrErrors, dynamo.AttrDoneAt, dynamo.AttrExpiresAt, dynamo.AttrContent}
			if !tc.unclaimed {
				want = append(want, dynamo.AttrClaimedAt)
			}
			require.ElementsMatch(t, want, slices.Collect(maps.Keys(item)), "what a tombstone keeps")

			done := get(t, s, "k")
			require.Equal(t, outbox.StatusDone, done.Status)
			require.Nil(t, done.Payload)
			require.Nil(t, done.Attributes)
			require.True(t, dynamo.SameContent(*done, staged), "a retry of the key is the same row")
		})
	}
}

// TestStore_StagingADeliveredKeyAgainReportsTheTombstoneAsCurrent:
// a producer's retry of a delivered key is refused with the tombstone as
// the current row, which SameContent matches to the retry and to no other
// content.
func TestStore_StagingADeliveredKeyAgainReportsTheTombstoneAsCurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t, dynamo.DefaultDoneRetention)
	staged := outbox.Row{Key: "k", Queue: "orders", Payload: []byte(`{"id":1}`), Attributes: map[string]string{"type": "created"}}
	require.NoError(t, s.Stage(ctx, staged, t0))
	require.NoError(t, s.Done(ctx, claim(t, s, "k", t0), t0))

	c := requireConflict(t, s.Stage(ctx, staged, t0.Add(time.Minute)))
	require.NotNil(t, c.Current)
	require.Empty(t, c.Malformed)
	require.Equal(t, outbox.StatusDone, c.Current.Status)
	require.True(t, dynamo.SameContent(*c.Current, staged))
	other := staged
	other.Payload = []byte(`{"id":2}`)
	require.False(t, dynamo.SameContent(*c.Current, other))
}

// TestSameContent_ComparesATombstoneByItsDigest: a tombstone has only its
// content's digest; each thing a producer chose still tells a retry from
// other content, the trace context excepted, and a done row that kept its
// payload (written before the tombstone dropped it) compares as it did.
func TestSameContent_ComparesATombstoneByItsDigest(t *testing.T) {
	t.Parallel()
	staged := outbox.Row{Key: "k", Queue: "events.fifo", Group: "g", NotBefore: t0, Payload: []byte(`{"id":1}`),
		Attributes: map[string]string{"type": "created", "v": "1"}}
	tomb := outbox.Row{Key: "k", Queue: staged.Queue, Group: staged.Group, NotBefore: staged.NotBefore, Status: outbox.StatusDone,
		ContentDigest: dynamo.ContentDigest(staged)}
	kept := staged
	kept.Status = outbox.StatusDone
	for _, tc := range []struct {
		name   string
		change func(*outbox.Row)
		same   bool
	}{
		{"the same row", func(*outbox.Row) {}, true},
		{"another trace context", func(r *outbox.Row) {
			r.Attributes = map[string]string{"type": "created", "v": "1", outbox.AttrTraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
		}, true},
		{"another payload", func(r *outbox.Row) { r.Payload = []byte(`{"id":2}`) }, false},
		{"another attribute value", func(r *outbox.Row) { r.Attributes = map[string]string{"type": "created", "v": "2"} }, false},
		{"an attribute fewer", func(r *outbox.Row) { r.Attributes = map[string]string{"type": "created"} }, false},
		{"an attribute's name and value moved across", func(r *outbox.Row) { r.Attributes = map[string]string{"type": "created", "v1": ""} }, false},
		{"the attributes in the payload", func(r *outbox.Row) { r.Payload, r.Attributes = []byte(`{"id":1}typecreatedv1`), nil }, false},
		{"another queue", func(r *outbox.Row) { r.Queue = "other.fifo" }, false},
		{"another group", func(r *outbox.Row) { r.Group = "h" }, false},
		{"another delay", func(r *outbox.Row) { r.NotBefore = t0.Add(time.Second) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			retry := staged
			retry.Attributes = maps.Clone(staged.Attributes)
			tc.change(&retry)
			require.Equal(t, tc.same, dynamo.SameContent(tomb, retry), "against the tombstone")
			require.Equal(t, tc.same, dynamo.SameContent(retry, tomb), "either way round")
			require.Equal(t, tc.same, dynamo.SameContent(kept, retry), "against a done row that kept its payload")
		})
	}
}

// TestDecode_ReadsADoneRowWithoutPayloadAndRefusesAnyOtherRowWithout:
// a tombstone's missing payload is no fault; a row still to deliver, or a
// dead letter, without one is malformed as before.
func TestDecode_ReadsADoneRowWithoutPayloadAndRefusesAnyOtherRowWithout(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status    outbox.Status
		malformed bool
	}{
		{outbox.StatusDone, false},
		{outbox.StatusPending, true},
		{outbox.StatusClaimed, true},
		{outbox.StatusFailed, true},
	} {
		t.Run(string(tc.status), func(t *testing.T) {
			t.Parallel()
			item := map[string]types.AttributeValue{
				dynamo.AttrKey:       &types.AttributeValueMemberS{Value: "k"},
				dynamo.AttrQueue:     &types.AttributeValueMemberS{Value: "orders"},
				dynamo.AttrStatus:    &types.AttributeValueMemberS{Value: string(tc.status)},
				dynamo.AttrAttempt:   &types.AttributeValueMemberN{Value: "1"},
				dynamo.AttrCreatedAt: &types.AttributeValueMemberN{Value: "1800000000000"},
				dynamo.AttrContent:   &types.AttributeValueMemberS{Value: "sha256:00"},
			}
			row, err := dynamo.Decode(item)
			if tc.malformed {
				require.ErrorIs(t, err, dynamo.ErrMalformed)
				require.ErrorContains(t, err, "missing payload")
				return
			}
			require.NoError(t, err)
			require.Nil(t, row.Payload)
			require.Equal(t, "sha256:00", row.ContentDigest)
		})
	}
}

// TestContentDigest_IsTheDocumentedSHA256 pins the digest's form, which
// producers in other languages compute alike: the SHA-256 of each byte
// string (the payload, then each attribute's name and value in name
// order, the trace context left out) after its 8-byte big-endian length.
func TestContentDigest_IsTheDocumentedSHA256(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		row  outbox.Row
		want string
	}{
		// printf '\0\0\0\0\0\0\0\5hello' | sha256sum
		{"a payload alone", outbox.Row{Payload: []byte("hello")}, "sha256:c6402d15196824a049ad87c371a5047a673535c2ac8607e2bfa483f7591cc27a"},
		// printf '\0\0\0\0\0\0\0\5hello\0\0\0\0\0\0\0\1a\0\0\0\0\0\0\0\1b\0\0\0\0\0\0\0\4type\0\0\0\0\0\0\0\7created' | sha256sum
		{"attributes in name order, the trace context left out", outbox.Row{Payload: []byte("hello"),
			Attributes: map[string]string{"type": "created", "a": "b", outbox.AttrTraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}},
			"sha256:8fceac6de96d75c0b34a4ac19941b4055d87b8e7e7e984457f0c72526c705aa6"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, dynamo.ContentDigest(tc.row))
		})
	}
}
