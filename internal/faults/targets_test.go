package faults_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/faults"
)

// acceptAllSNS stands in for SNS: it accepts every entry and remembers
// which.
type acceptAllSNS struct{ got *[]string }

func (a acceptAllSNS) PublishBatch(_ context.Context, in *sns.PublishBatchInput, _ ...func(*sns.Options)) (*sns.PublishBatchOutput, error) {
	out := &sns.PublishBatchOutput{}
	for _, e := range in.PublishBatchRequestEntries {
		*a.got = append(*a.got, aws.ToString(e.Id))
		out.Successful = append(out.Successful, snstypes.PublishBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

// acceptAllEvents stands in for EventBridge: it accepts every event and
// remembers the keys it was given, in order.
type acceptAllEvents struct{ got *[]string }

func (a acceptAllEvents) PutEvents(_ context.Context, in *eventbridge.PutEventsInput, _ ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	out := &eventbridge.PutEventsOutput{}
	for i, e := range in.Entries {
		key, _ := faults.EventSite(e)
		*a.got = append(*a.got, key)
		out.Entries = append(out.Entries, ebtypes.PutEventsResultEntry{EventId: aws.String("ev-" + strconv.Itoa(i))})
	}
	return out, nil
}

func publishBatch(n int) *sns.PublishBatchInput {
	in := &sns.PublishBatchInput{TopicArn: aws.String("arn:aws:sns:us-east-1:123456789012:t")}
	for i := range n {
		in.PublishBatchRequestEntries = append(in.PublishBatchRequestEntries, snstypes.PublishBatchRequestEntry{
			Id: aws.String(strconv.Itoa(i)), Message: aws.String("{}"),
			MessageAttributes: map[string]snstypes.MessageAttributeValue{
				delivery.AttrKey:     {DataType: aws.String("String"), StringValue: aws.String("k" + strconv.Itoa(i))},
				delivery.AttrAttempt: {DataType: aws.String("Number"), StringValue: aws.String("1")},
			},
		})
	}
	return in
}

func putEvents(n int) *eventbridge.PutEventsInput {
	in := &eventbridge.PutEventsInput{}
	for i := range n {
		in.Entries = append(in.Entries, ebtypes.PutEventsRequestEntry{
			EventBusName: aws.String("bus"), Source: aws.String("test"), DetailType: aws.String("t"),
			Detail: aws.String(`{"outflow":{"key":"k` + strconv.Itoa(i) + `","attempt":1},"n":1}`),
		})
	}
	return in
}

// targetFault is what one injected send fault should look like, on any
// target.
type targetFault struct {
	kind        faults.Kind
	hits        int
	callErr     bool
	reaches     bool // the entries reach the service
	senderFault bool
	windows     int
}

var targetFaults = []targetFault{
	{kind: faults.SendCall, hits: 1, callErr: true},
	{kind: faults.SendEntry, hits: 3},
	{kind: faults.SendSender, hits: 3, senderFault: true},
	{kind: faults.SendAmbiguous, hits: 3, reaches: true, windows: 3},
}

func TestSNS_InjectsEachSendFaultOnTheWire(t *testing.T) {
	t.Parallel()
	for _, tt := range targetFaults {
		t.Run(string(tt.kind), func(t *testing.T) {
			t.Parallel()
			var got []string
			plan := faults.NewPlan(7, map[faults.Kind]float64{tt.kind: 1})
			out, err := faults.SNS{Next: acceptAllSNS{&got}, Plan: plan}.PublishBatch(context.Background(), publishBatch(3))
			require.Equal(t, tt.hits, plan.Counts()[tt.kind])
			if tt.callErr {
				require.ErrorIs(t, err, faults.ErrInjected)
				require.Empty(t, got)
				return
			}
			require.NoError(t, err)
			require.Empty(t, out.Successful)
			require.Len(t, out.Failed, 3)
			for _, f := range out.Failed {
				require.Equal(t, tt.senderFault, f.SenderFault)
				require.Contains(t, aws.ToString(f.Message), string(tt.kind))
			}
			require.Equal(t, tt.reaches, len(got) == 3, "entries that reached SNS: %v", got)
			require.Len(t, plan.DuplicateWindows(), tt.windows)
		})
	}
}

func TestEventBridge_InjectsEachSendFaultOnTheWire(t *testing.T) {
	t.Parallel()
	for _, tt := range targetFaults {
		t.Run(string(tt.kind), func(t *testing.T) {
			t.Parallel()
			var got []string
			plan := faults.NewPlan(7, map[faults.Kind]float64{tt.kind: 1})
			out, err := faults.EventBridge{Next: acceptAllEvents{&got}, Plan: plan}.PutEvents(context.Background(), putEvents(3))
			require.Equal(t, tt.hits, plan.Counts()[tt.kind])
			if tt.callErr {
				require.ErrorIs(t, err, faults.ErrInjected)
				require.Empty(t, got)
				return
			}
			require.NoError(t, err)
			require.Len(t, out.Entries, 3)
			require.EqualValues(t, 3, out.FailedEntryCount)
			for _, e := range out.Entries {
				// InvalidArgument is a code the deliverer takes as the
				// event's own fault, InternalFailure as a transient one.
				require.Equal(t, tt.senderFault, aws.ToString(e.ErrorCode) == "InvalidArgument", aws.ToString(e.ErrorCode))
				require.Contains(t, aws.ToString(e.ErrorMessage), string(tt.kind))
			}
			require.Equal(t, tt.reaches, len(got) == 3, "events that reached EventBridge: %v", got)
			require.Len(t, plan.DuplicateWindows(), tt.windows)
		})
	}
}

// TestEventBridge_AnswersInTheOrderAsked checks that the answer to a
// PutEvents with some entries failed by a fault still lines up with the
// entries: PutEvents answers by position, not by id.
func TestEventBridge_AnswersInTheOrderAsked(t *testing.T) {
	t.Parallel()
	var got []string
	plan := faults.NewPlan(3, map[faults.Kind]float64{faults.SendEntry: 0.5})
	in := putEvents(10)
	out, err := faults.EventBridge{Next: acceptAllEvents{&got}, Plan: plan}.PutEvents(context.Background(), in)
	require.NoError(t, err)
	require.Len(t, out.Entries, 10)
	failed := plan.Counts()[faults.SendEntry]
	require.Positive(t, failed, "seed 3 fails some of the ten")
	require.Less(t, failed, 10, "seed 3 passes some of the ten")
	var passed []string
	for i, e := range out.Entries {
		key, attempt := faults.EventSite(in.Entries[i])
		hit := faults.NewPlan(3, map[faults.Kind]float64{faults.SendEntry: 0.5}).Hit(faults.SendEntry, key, attempt)
		require.Equal(t, hit, e.ErrorCode != nil, "entry %d (%s)", i, key)
		if e.ErrorCode == nil {
			passed = append(passed, key)
		}
	}
	require.Equal(t, passed, got, "the entries that passed reached EventBridge, in order")
	require.EqualValues(t, failed, out.FailedEntryCount)
}
