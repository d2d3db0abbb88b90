package faults_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/faults"
)

// acceptAll stands in for SQS: it accepts every entry and remembers which.
type acceptAll struct{ got *[]string }

func (a acceptAll) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		*a.got = append(*a.got, aws.ToString(e.Id))
		out.Successful = append(out.Successful, types.SendMessageBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

func batch(n int) *sqs.SendMessageBatchInput {
	in := &sqs.SendMessageBatchInput{QueueUrl: aws.String("q")}
	for i := range n {
		in.Entries = append(in.Entries, types.SendMessageBatchRequestEntry{
			Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String("{}"),
			MessageAttributes: map[string]types.MessageAttributeValue{
				delivery.AttrKey:     {DataType: aws.String("String"), StringValue: aws.String("k" + strconv.Itoa(i))},
				delivery.AttrAttempt: {DataType: aws.String("Number"), StringValue: aws.String("1")},
			},
		})
	}
	return in
}

func TestSQS_InjectsEachSendFaultOnTheWire(t *testing.T) {
	t.Parallel()
	tests := []struct {
		kind        faults.Kind
		hits        int
		callErr     bool
		reachesSQS  bool
		senderFault bool
		windows     int
	}{
		{kind: faults.SendCall, hits: 1, callErr: true},
		{kind: faults.SendEntry, hits: 3},
		{kind: faults.SendSender, hits: 3, senderFault: true},
		{kind: faults.SendAmbiguous, hits: 3, reachesSQS: true, windows: 3},
	}
	for _, tt := range tests {
		t.Run(string(tt.kind), func(t *testing.T) {
			t.Parallel()
			var got []string
			plan := faults.NewPlan(7, map[faults.Kind]float64{tt.kind: 1})
			out, err := faults.SQS{Next: acceptAll{&got}, Plan: plan}.SendMessageBatch(context.Background(), batch(3))
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
			require.Equal(t, tt.reachesSQS, len(got) == 3, "entries that reached SQS: %v", got)
			require.Len(t, plan.DuplicateWindows(), tt.windows)
		})
	}
}

func TestSQS_SameSeedSameDecisions(t *testing.T) {
	t.Parallel()
	run := func(seed uint64) []string {
		var got []string
		plan := faults.NewPlan(seed, map[faults.Kind]float64{faults.SendEntry: 0.5})
		_, err := faults.SQS{Next: acceptAll{&got}, Plan: plan}.SendMessageBatch(context.Background(), batch(10))
		require.NoError(t, err)
		return got
	}
	require.Equal(t, run(42), run(42))
	require.NotEqual(t, run(42), run(43))
}
