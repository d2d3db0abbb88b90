package delivery_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/outbox"
	"github.com/outflowhq/outflow/internal/target"
)

// recorder answers SendMessageBatch with success for every entry, or with
// what answer says, and records each request.
type recorder struct {
	mu     sync.Mutex
	calls  []*sqs.SendMessageBatchInput
	answer func(*sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error)
}

func (r *recorder) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	r.mu.Lock()
	r.calls = append(r.calls, in)
	r.mu.Unlock()
	if r.answer != nil {
		return r.answer(in)
	}
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		out.Successful = append(out.Successful, types.SendMessageBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

func rows(n, size int) []outbox.Row {
	out := make([]outbox.Row, n)
	for i := range out {
		out[i] = outbox.Row{Key: "k" + strconv.Itoa(i), Queue: "q", Payload: []byte(strings.Repeat("x", size)), Attempt: 1}
	}
	return out
}

// router is a deliverer over routes, failing t when they do not read.
func router(t *testing.T, c delivery.Clients, routes delivery.Routes) *delivery.Router {
	t.Helper()
	r, err := delivery.New(c, routes, 0)
	require.NoError(t, err)
	return r
}

var routes = delivery.Routes{"q": "https://sqs.us-east-1.amazonaws.com/123456789012/q", "f.fifo": "https://sqs.us-east-1.amazonaws.com/123456789012/f.fifo"}

func TestDeliver_SplitsBatchesByCountAndSize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		rows      []outbox.Row
		wantSizes []int
	}{
		{"count", rows(25, 10), []int{10, 10, 5}},
		{"size", rows(5, 100*1024), []int{2, 2, 1}},
		{"exactly ten", rows(10, 10), []int{10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := &recorder{}
			errs := router(t, delivery.Clients{SQS: rec}, routes).Deliver(context.Background(), "q", tt.rows)
			require.Len(t, errs, len(tt.rows))
			for _, err := range errs {
				require.NoError(t, err)
			}
			var sizes []int
			for _, c := range rec.calls {
				sizes = append(sizes, len(c.Entries))
			}
			require.Equal(t, tt.wantSizes, sizes)
		})
	}
}

func TestDeliver_RefusesRowsSQSWouldRejectAsPermanent(t *testing.T) {
	t.Parallel()
	many := map[string]string{}
	for i := range 9 {
		many["a"+strconv.Itoa(i)] = "v"
	}
	tests := []struct {
		name  string
		queue string
		row   outbox.Row
		want  string
	}{
		{"too large", "q", outbox.Row{Key: "k", Payload: []byte(strings.Repeat("x", delivery.MaxMessageBytes))}, "over the 262144-byte limit"},
		{"too many attributes", "q", outbox.Row{Key: "k", Payload: []byte("x"), Attributes: many}, "too many message attributes: 11"},
		{"fifo without group", "f.fifo", outbox.Row{Key: "k", Payload: []byte("x")}, "needs a message group"},
		{"empty payload", "q", outbox.Row{Key: "k"}, "empty payload"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := &recorder{}
			good := outbox.Row{Key: "good", Payload: []byte("x"), Group: "g"}
			errs := router(t, delivery.Clients{SQS: rec}, routes).Deliver(context.Background(), tt.queue, []outbox.Row{tt.row, good})
			require.ErrorContains(t, errs[0], tt.want)
			require.True(t, outbox.IsPermanent(errs[0]))
			require.NoError(t, errs[1], "one bad row does not hold up the others")
		})
	}
}

func TestDeliver_NoRouteIsRetriedNotPermanent(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	errs := router(t, delivery.Clients{SQS: rec}, routes).Deliver(context.Background(), "nowhere", []outbox.Row{{Key: "a", Payload: []byte("x")}, {Key: "b", Payload: []byte("x")}})
	require.Len(t, errs, 2)
	for _, err := range errs {
		require.EqualError(t, err, `no route for queue "nowhere"`)
		require.True(t, outbox.IsUnrouted(err), "counted as unrouted")
		require.False(t, outbox.IsPermanent(err), "retried: the route may be missing from this dispatcher only")
		require.True(t, outbox.Definite(err), "nothing was sent, so an ordered group need not wait for it")
	}
	require.Empty(t, rec.calls, "nothing sent")
}

func TestDeliver_ClassifiesFailures(t *testing.T) {
	t.Parallel()
	rec := &recorder{answer: func(in *sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error) {
		return &sqs.SendMessageBatchOutput{
			Successful: []types.SendMessageBatchResultEntry{{Id: in.Entries[0].Id}},
			Failed: []types.BatchResultErrorEntry{
				{Id: in.Entries[1].Id, Code: aws.String("InvalidMessageContents"), Message: aws.String("bad"), SenderFault: true},
				{Id: in.Entries[2].Id, Code: aws.String("InternalError"), Message: aws.String("oops"), SenderFault: false},
			},
		}, nil // entry 3 gets no answer at all
	}}
	errs := router(t, delivery.Clients{SQS: rec}, routes).Deliver(context.Background(), "q", rows(4, 1))
	require.NoError(t, errs[0])
	require.True(t, outbox.IsPermanent(errs[1]))
	require.ErrorContains(t, errs[1], "InvalidMessageContents: bad")
	require.Error(t, errs[2])
	require.False(t, outbox.IsPermanent(errs[2]))
	require.Error(t, errs[3])
	require.False(t, outbox.IsPermanent(errs[3]))

	down := &recorder{answer: func(*sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error) {
		return nil, errors.New("connection refused")
	}}
	for _, err := range router(t, delivery.Clients{SQS: down}, routes).Deliver(context.Background(), "q", rows(3, 1)) {
		require.ErrorContains(t, err, "connection refused")
		require.False(t, outbox.IsPermanent(err), "a failed call is retried")
	}
}

func TestDeliver_SetsAttributesAndFIFOFields(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	row := outbox.Row{Key: "k1", Payload: []byte{0xff}, Attempt: 3, Group: "g", Attributes: map[string]string{"type": "created"}}
	require.NoError(t, router(t, delivery.Clients{SQS: rec}, routes).Deliver(context.Background(), "f.fifo", []outbox.Row{row})[0])
	e := rec.calls[0].Entries[0]
	require.Equal(t, "/w==", aws.ToString(e.MessageBody))
	require.Equal(t, "base64", aws.ToString(e.MessageAttributes[delivery.AttrEncoding].StringValue))
	require.Equal(t, "k1", aws.ToString(e.MessageAttributes[delivery.AttrKey].StringValue))
	require.Equal(t, "3", aws.ToString(e.MessageAttributes[delivery.AttrAttempt].StringValue))
	require.Equal(t, "Number", aws.ToString(e.MessageAttributes[delivery.AttrAttempt].DataType))
	require.Equal(t, "created", aws.ToString(e.MessageAttributes["type"].StringValue))
	require.Equal(t, "g", aws.ToString(e.MessageGroupId))
	require.Equal(t, "k1", aws.ToString(e.MessageDeduplicationId))
}

func TestBody_KeepsSQSTextAndEncodesTheRest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		payload    []byte
		wantBinary bool
	}{
		{[]byte(`{"a":"ü✓"}`), false},
		{[]byte("tab\tnewline\n"), false},
		{[]byte("nul\x00"), true},
		{[]byte("bell\x07"), true},
		{[]byte{0xc3, 0x28}, true}, // invalid UTF-8
		{[]byte("\uFFFE"), true},   // not allowed by SQS
	}
	for _, tt := range tests {
		body, binary := target.Body(tt.payload)
		require.Equal(t, tt.wantBinary, binary, "%q", tt.payload)
		if !binary {
			require.Equal(t, string(tt.payload), body)
		}
	}
}

func TestDeliver_AgainstSQS_LargeBatchesAndFIFOArrive(t *testing.T) {
	t.Parallel()
	std, fifo := awstest.NewQueue(t, false), awstest.NewQueue(t, true)
	d := router(t, delivery.Clients{SQS: awstest.SQS(t)}, delivery.Routes{"std": std, "fifo.fifo": fifo})
	big := rows(7, 100*1024)
	for _, err := range d.Deliver(context.Background(), "std", big) {
		require.NoError(t, err)
	}
	require.Len(t, awstest.Receive(t, std, len(big), 20*time.Second), len(big))

	ordered := rows(10, 5)
	for i := range ordered {
		ordered[i].Group = "g"
	}
	for _, err := range d.Deliver(context.Background(), "fifo.fifo", ordered) {
		require.NoError(t, err)
	}
	got := awstest.Receive(t, fifo, len(ordered), 20*time.Second)
	require.Len(t, got, len(ordered))
	for i, m := range got {
		require.Equal(t, ordered[i].Key, aws.ToString(m.MessageAttributes[delivery.AttrKey].StringValue), "FIFO order within one batch")
	}
}

func TestDeliver_ToSQS_CarriesTheTraceParentAndXRaysTraceHeader(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		trace      string
		wantHeader string
	}{
		{"sampled", traceParent, "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"},
		{"not sampled", "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-00", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=0"},
		{"not a traceparent: sent as it is, no header", "garbage", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			q := awstest.NewQueue(t, false)
			d := router(t, delivery.Clients{SQS: awstest.SQS(t)}, delivery.Routes{"q": q})
			row := outbox.Row{Key: "k", Payload: []byte("x"), Attempt: 1, Attributes: map[string]string{delivery.AttrTraceParent: tt.trace}}
			require.NoError(t, d.Deliver(context.Background(), "q", []outbox.Row{row})[0])
			got := awstest.Receive(t, q, 1, 20*time.Second)
			require.Len(t, got, 1)
			require.Equal(t, tt.trace, aws.ToString(got[0].MessageAttributes[delivery.AttrTraceParent].StringValue))
			require.Equal(t, tt.wantHeader, got[0].Attributes["AWSTraceHeader"])
		})
	}
}

func TestDeliver_ToSQS_RetriesEntriesRefusedForThrottlingOrTheKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		code          string
		wantPermanent bool
	}{
		{"KMS.DisabledException", false},
		{"KmsAccessDenied", false},
		{"KMS.AccessDeniedException", false},
		{"KMS.ThrottlingException", false},
		{"RequestThrottled", false},
		{"AccessDenied", false},
		{"InvalidMessageContents", true},
		{"InvalidParameterValue", true},
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			t.Parallel()
			rec := &recorder{answer: func(in *sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error) {
				return &sqs.SendMessageBatchOutput{Failed: []types.BatchResultErrorEntry{
					{Id: in.Entries[0].Id, Code: aws.String(tt.code), Message: aws.String("refused"), SenderFault: true},
				}}, nil
			}}
			err := router(t, delivery.Clients{SQS: rec}, routes).Deliver(context.Background(), "q", rows(1, 1))[0]
			require.ErrorContains(t, err, tt.code)
			require.Equal(t, tt.wantPermanent, outbox.IsPermanent(err))
		})
	}
}
