package delivery_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sns/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/outbox"
)

// countingSNS counts the PublishBatch calls and entries that pass to next.
type countingSNS struct {
	next           delivery.SNSAPI
	calls, entries atomic.Int64
}

func (c *countingSNS) PublishBatch(ctx context.Context, in *sns.PublishBatchInput, opts ...func(*sns.Options)) (*sns.PublishBatchOutput, error) {
	c.calls.Add(1)
	c.entries.Add(int64(len(in.PublishBatchRequestEntries)))
	return c.next.PublishBatch(ctx, in, opts...)
}

// answerSNS answers PublishBatch with answer.
type answerSNS func(*sns.PublishBatchInput) (*sns.PublishBatchOutput, error)

func (a answerSNS) PublishBatch(_ context.Context, in *sns.PublishBatchInput, _ ...func(*sns.Options)) (*sns.PublishBatchOutput, error) {
	return a(in)
}

const traceParent = "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01"

func TestDeliver_ToSNS_ArrivesAtARawSubscriberAsAQueueRouteWould(t *testing.T) {
	t.Parallel()
	topic := awstest.NewTopic(t, false)
	sub := awstest.Subscribe(t, topic, false)
	api := &countingSNS{next: awstest.SNS(t)}
	d := router(t, delivery.Clients{SNS: api}, delivery.Routes{"notices": topic})

	// Phase 1: 23 small rows go in three requests of at most ten.
	small := rows(23, 10)
	small[0].Attributes = map[string]string{"type": "created", delivery.AttrTraceParent: traceParent}
	small[1].Payload = []byte{0xff, 0x00}
	for _, err := range d.Deliver(context.Background(), "notices", small) {
		require.NoError(t, err)
	}
	require.EqualValues(t, 3, api.calls.Load())

	got := awstest.Receive(t, sub, len(small), 20*time.Second)
	require.Len(t, got, len(small))
	byKey := map[string]int{}
	for i, m := range got {
		byKey[aws.ToString(m.MessageAttributes[delivery.AttrKey].StringValue)] = i
	}
	require.Len(t, byKey, len(small), "every row arrived once")
	first := got[byKey["k0"]]
	require.Equal(t, strings.Repeat("x", 10), aws.ToString(first.Body))
	require.Equal(t, "created", aws.ToString(first.MessageAttributes["type"].StringValue))
	require.Equal(t, traceParent, aws.ToString(first.MessageAttributes[delivery.AttrTraceParent].StringValue))
	require.Equal(t, "1", aws.ToString(first.MessageAttributes[delivery.AttrAttempt].StringValue))
	binary := got[byKey["k1"]]
	require.Equal(t, "/wA=", aws.ToString(binary.Body))
	require.Equal(t, "base64", aws.ToString(binary.MessageAttributes[delivery.AttrEncoding].StringValue))

	// Phase 2: large rows split by SNS's 256 KiB per request.
	api.calls.Store(0)
	big := rows(5, 100*1024)
	for _, err := range d.Deliver(context.Background(), "notices", big) {
		require.NoError(t, err)
	}
	require.EqualValues(t, 3, api.calls.Load(), "two 100 KiB messages a request")
	require.Len(t, awstest.Receive(t, sub, len(big), 20*time.Second), len(big))
}

func TestDeliver_ToSNSFIFO_KeepsGroupOrderAndRefusesRowsWithoutAGroup(t *testing.T) {
	t.Parallel()
	topic := awstest.NewTopic(t, true)
	sub := awstest.Subscribe(t, topic, true)
	d := router(t, delivery.Clients{SNS: awstest.SNS(t)}, delivery.Routes{"fan.fifo": topic})

	ordered := rows(12, 5)
	for i := range ordered {
		ordered[i].Group = "g"
	}
	nogroup := outbox.Row{Key: "nogroup", Payload: []byte("x"), Attempt: 1}
	errs := d.Deliver(context.Background(), "fan.fifo", append(ordered, nogroup))
	for _, err := range errs[:len(ordered)] {
		require.NoError(t, err)
	}
	require.True(t, outbox.IsPermanent(errs[len(ordered)]))
	require.ErrorIs(t, errs[len(ordered)], delivery.ErrGroupRequired)

	got := awstest.Receive(t, sub, len(ordered), 20*time.Second)
	require.Len(t, got, len(ordered))
	for i, m := range got {
		require.Equal(t, ordered[i].Key, aws.ToString(m.MessageAttributes[delivery.AttrKey].StringValue), "FIFO order within the group")
		require.Equal(t, "g", m.Attributes["MessageGroupId"])
	}
}

func TestDeliver_ToSNS_ClassifiesEachEntrysFailure(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		api           delivery.SNSAPI
		wantErr       []string // "" for success
		wantPermanent []bool
	}{
		{
			name: "per entry",
			api: answerSNS(func(in *sns.PublishBatchInput) (*sns.PublishBatchOutput, error) {
				e := in.PublishBatchRequestEntries
				return &sns.PublishBatchOutput{
					Successful: []types.PublishBatchResultEntry{{Id: e[0].Id}},
					Failed: []types.BatchResultErrorEntry{
						{Id: e[1].Id, Code: aws.String("InvalidParameter"), Message: aws.String("bad"), SenderFault: true},
						{Id: e[2].Id, Code: aws.String("InternalError"), Message: aws.String("oops")},
					},
				}, nil // entry 3 gets no answer
			}),
			wantErr:       []string{"", "InvalidParameter: bad", "InternalError: oops", "sns returned no result"},
			wantPermanent: []bool{false, true, false, false},
		},
		{
			name: "whole request",
			api: answerSNS(func(*sns.PublishBatchInput) (*sns.PublishBatchOutput, error) {
				return nil, errors.New("AuthorizationError")
			}),
			wantErr:       []string{"AuthorizationError", "AuthorizationError", "AuthorizationError", "AuthorizationError"},
			wantPermanent: []bool{false, false, false, false},
		},
		{
			name:          "a topic that does not exist",
			api:           awstest.SNS(t),
			wantErr:       []string{"NotFound", "NotFound", "NotFound", "NotFound"},
			wantPermanent: []bool{false, false, false, false},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := router(t, delivery.Clients{SNS: tt.api}, delivery.Routes{"notices": "arn:aws:sns:us-east-1:123456789012:outflow-missing"})
			errs := d.Deliver(context.Background(), "notices", rows(4, 1))
			for i, err := range errs {
				if tt.wantErr[i] == "" {
					require.NoError(t, err)
					continue
				}
				require.ErrorContains(t, err, tt.wantErr[i])
				require.Equal(t, tt.wantPermanent[i], outbox.IsPermanent(err), "entry %d", i)
			}
		})
	}
}

func TestDeliver_ToSNS_KeepsToSNSsSizeLimitWhateverTheSQSLimit(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	ok := answerSNS(func(in *sns.PublishBatchInput) (*sns.PublishBatchOutput, error) {
		calls.Add(1)
		out := &sns.PublishBatchOutput{}
		for _, e := range in.PublishBatchRequestEntries {
			out.Successful = append(out.Successful, types.PublishBatchResultEntry{Id: e.Id})
		}
		return out, nil
	})
	d, err := delivery.New(delivery.Clients{SNS: ok}, delivery.Routes{"notices": "arn:aws:sns:us-east-1:123456789012:n"}, 1024*1024)
	require.NoError(t, err)
	// SNS's documented limit is 256 KiB, 262,144 bytes, for a message with
	// its attributes: a payload of that many bytes is over it. Written out,
	// not MaxSNSBytes: a wrong constant would move the input with it.
	errs := d.Deliver(context.Background(), "notices", append(rows(1, 262_144), rows(1, 10)...))
	require.ErrorIs(t, errs[0], delivery.ErrTooLarge)
	require.True(t, outbox.IsPermanent(errs[0]))
	require.NoError(t, errs[1])
	require.EqualValues(t, 1, calls.Load())
}
