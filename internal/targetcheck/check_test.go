package targetcheck_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/targetcheck"
)

func TestMain(m *testing.M) { os.Exit(awstest.Main(m)) }

func checker(t *testing.T) targetcheck.Checker {
	return targetcheck.Checker{Queues: awstest.SQS(t), Topics: awstest.SNS(t), Buses: awstest.EventBridge(t)}
}

// world is a set of real targets on the moto server, one of each kind
// and FIFO-ness, and what each route and grant would name.
type world struct {
	queue, fifoQueue, topic, fifoTopic, bus string // target strings
	queueARN, fifoQueueARN, busARN          string
	oddFIFO, oddFIFOARN                     string // a standard queue whose name ends in .fifo
	topicToStandard                         string // a FIFO topic with a standard queue subscribed
}

func newWorld(t *testing.T) world {
	t.Helper()
	var w world
	w.queue, w.fifoQueue = awstest.NewQueue(t, false), awstest.NewQueue(t, true)
	w.queueARN, w.fifoQueueARN = awstest.QueueARN(t, w.queue), awstest.QueueARN(t, w.fifoQueue)
	w.topic, w.fifoTopic = awstest.NewTopic(t, false), awstest.NewTopic(t, true)
	awstest.Subscribe(t, w.fifoTopic, true)
	name, arn := awstest.NewBus(t)
	w.bus, w.busARN = name+"?source=shop", arn
	// moto, as LocalStack, creates a standard queue under a .fifo name
	// when FifoQueue is not given; AWS refuses it.
	out, err := awstest.SQS(t).CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(awstest.UniqueName("outflow-test") + ".fifo")})
	require.NoError(t, err)
	w.oddFIFO = aws.ToString(out.QueueUrl)
	t.Cleanup(func() {
		_, _ = awstest.SQS(t).DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl})
	})
	w.oddFIFOARN = awstest.QueueARN(t, w.oddFIFO)
	w.topicToStandard = awstest.NewTopic(t, true)
	awstest.Subscribe(t, w.topicToStandard, false)
	return w
}

func (w world) grants() *targetcheck.Grants {
	return &targetcheck.Grants{Queues: []string{w.queueARN, w.fifoQueueARN, w.oddFIFOARN},
		Topics: []string{w.topic, w.fifoTopic, w.topicToStandard}, Buses: []string{w.busARN}}
}

// TestCheck_FindsEachMisconfigurationWithItsFix runs the check on routes
// that are right, and on each way a route goes wrong that only shows once
// rows are staged: each finding names its route, what is wrong, and the
// fix; a right route gives none.
func TestCheck_FindsEachMisconfigurationWithItsFix(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	missingQueue := w.queue[:strings.LastIndex(w.queue, "/")+1] + "no-such-queue"
	for _, tc := range []struct {
		name    string
		in      func(w world) targetcheck.Input
		want    []string // substrings of each finding's route + problem, in order
		wantFix []string
	}{
		{name: "every kind of target, right and granted",
			in: func(w world) targetcheck.Input {
				return targetcheck.Input{Routes: map[string]string{"billing": w.queue, "orders.fifo": w.fifoQueue,
					"alerts": w.topic, "ledger.fifo": w.fifoTopic, "shop": w.bus}, Ordered: []string{"orders.fifo", "ledger.fifo"}, Grants: w.grants()}
			}},
		{name: "a missing queue",
			in: func(w world) targetcheck.Input {
				return targetcheck.Input{Routes: map[string]string{"billing": missingQueue}, Grants: w.grants()}
			},
			want: []string{"billing: its queue " + missingQueue + " does not exist"}, wantFix: []string{"create the queue"}},
		{name: "a missing topic and a missing bus",
			in: func(w world) targetcheck.Input {
				return targetcheck.Input{Routes: map[string]string{"alerts": w.topic + "-gone", "shop": "gone-bus?source=shop"}}
			},
			want:    []string{"alerts: its topic " + w.topic + "-gone does not exist", "shop: its event bus gone-bus does not exist"},
			wantFix: []string{"create the topic", "create the event bus"}},
		{name: "a route named FIFO on a standard queue, ordered",
			in: func(w world) targetcheck.Input {
				return targetcheck.Input{Routes: map[string]string{"odd.fifo": w.oddFIFO}, Ordered: []string{"odd.fifo"}, Grants: w.grants()}
			},
			want:    []string{"odd.fifo: the route's name says FIFO, but its queue " + w.oddFIFO + " is standard: the route is ordered"},
			wantFix: []string{"create the queue as FIFO"}},
		{name: "a missing grant",
			in: func(w world) targetcheck.Input {
				g := w.grants()
				g.Queues = g.Queues[1:]
				return targetcheck.Input{Routes: map[string]string{"billing": w.queue, "orders.fifo": w.fifoQueue}, Grants: g}
			},
			want:    []string{"billing: the functions are not granted " + w.queueARN},
			wantFix: []string{"add " + w.queueARN + " to the stack's QueueArns parameter"}},
		{name: "grants not known are not checked",
			in: func(w world) targetcheck.Input {
				return targetcheck.Input{Routes: map[string]string{"billing": w.queue}}
			}},
		{name: "an ordered FIFO topic that delivers to a standard queue",
			in: func(w world) targetcheck.Input {
				return targetcheck.Input{Routes: map[string]string{"ledger.fifo": w.topicToStandard}, Ordered: []string{"ledger.fifo"}, Grants: w.grants()}
			},
			want: []string{"ledger.fifo: is ordered, but its topic delivers to the standard queue"}, wantFix: []string{"subscribe a FIFO queue"}},
		{name: "an ordered route with no route",
			in: func(w world) targetcheck.Input {
				return targetcheck.Input{Routes: map[string]string{"billing": w.queue}, Ordered: []string{"orders.fifo"}}
			},
			want: []string{"orders.fifo: is an ordered route (OrderedRoutes) but no route has this name"}, wantFix: []string{"add it to Routes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := checker(t).Check(context.Background(), tc.in(w))
			require.NoError(t, err)
			require.Len(t, got, len(tc.want), "%+v", got)
			for i, f := range got {
				require.Contains(t, f.Route+": "+f.Problem, tc.want[i])
				require.Contains(t, f.Fix, tc.wantFix[i])
			}
		})
	}
}
