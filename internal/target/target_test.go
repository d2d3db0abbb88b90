package target_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/target"
)

func TestParseRoutes_ReadsEachKindOfTarget(t *testing.T) {
	t.Parallel()
	got, err := target.ParseRoutes(" orders=http://localhost:4566/000000000000/orders , events.fifo=https://sqs.eu-west-1.amazonaws.com/1/events.fifo," +
		"notices=arn:aws:sns:us-east-1:123456789012:notices,fan.fifo=arn:aws:sns:us-east-1:123456789012:fan.fifo," +
		"domain=arn:aws:events:us-east-1:123456789012:event-bus/domain?source=app.orders&detail-type=OrderPlaced,default-bus=default?detail-type=Changed")
	require.NoError(t, err)
	require.Len(t, got, 6)
	back, err := target.ParseRoutes(got.String())
	require.NoError(t, err)
	require.Equal(t, got, back)

	targets, err := got.Targets()
	require.NoError(t, err)
	require.Equal(t, map[string]target.Target{
		"orders":      {Kind: target.KindSQS, Address: "http://localhost:4566/000000000000/orders"},
		"events.fifo": {Kind: target.KindSQS, Address: "https://sqs.eu-west-1.amazonaws.com/1/events.fifo", FIFO: true},
		"notices":     {Kind: target.KindSNS, Address: "arn:aws:sns:us-east-1:123456789012:notices"},
		"fan.fifo":    {Kind: target.KindSNS, Address: "arn:aws:sns:us-east-1:123456789012:fan.fifo", FIFO: true},
		"domain": {Kind: target.KindEventBridge, Address: "arn:aws:events:us-east-1:123456789012:event-bus/domain",
			Source: "app.orders", DetailType: "OrderPlaced"},
		"default-bus": {Kind: target.KindEventBridge, Address: "default", DetailType: "Changed"},
	}, targets)
}

func TestParseRoutes_RefusesWhatNoTargetIs(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		"orders":                                          "want name=target",
		"=http://x/q":                                     "want name=target",
		"orders=not a url":                                "is not a queue URL, a topic ARN or an event bus ARN or name",
		"orders=sqs.amazonaws.com/1/q":                    "is not a queue URL, a topic ARN or an event bus ARN or name",
		"a=http://x/q,a=http://x/r":                       "given twice",
		"events=http://x/q.fifo":                          "ends in .fifo exactly when its queue or topic is FIFO",
		"events.fifo=http://x/q":                          "ends in .fifo exactly when its queue or topic is FIFO",
		"t=arn:aws:sns:us-east-1:123456789012:t.fifo":     "ends in .fifo exactly when its queue or topic is FIFO",
		"t.fifo=arn:aws:sns:us-east-1:123456789012:t":     "ends in .fifo exactly when its queue or topic is FIFO",
		"t=arn:aws:sns:us-east-1:123:t":                   "is not an SNS topic ARN",
		"t=arn:aws:sns:us-east-1:123456789012:t?source=x": "only EventBridge routes take options",
		"q=http://x/q?source=x":                           "only EventBridge routes take options",
		"b=arn:aws:events:us-east-1:123456789012:rule/r":  "is not an EventBridge event bus ARN",
		"b=bus?source=x&kind=y":                           "unknown option",
		"b=bus?source=":                                   "wants one non-empty value",
		"b=bus?source=a&source=b":                         "wants one non-empty value",
		"b=bus?source=aws.orders":                         "AWS's own",
		"b.fifo=bus?source=x":                             "ends in .fifo exactly when its queue or topic is FIFO",
		"b=bus":                                           "a bus given by name needs its options",
	}
	for in, want := range tests {
		t.Run(in, func(t *testing.T) {
			t.Parallel()
			_, err := target.ParseRoutes(in)
			require.ErrorContains(t, err, want)
		})
	}
}

func TestParseTarget_KeepsAPlusInAnOption(t *testing.T) {
	t.Parallel()
	got, err := target.ParseTarget("bus?source=my+app&detail-type=Order%20Placed")
	require.NoError(t, err)
	require.Equal(t, "my+app", got.Source)
	require.Equal(t, "Order Placed", got.DetailType)
}
