package delivery_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/delivery"
)

// docs/targets.md: a bus is written "by its name (no slash) with at
// least one of them [source, detail-type]". An empty query string gives
// none, so a queue or topic written by name with a stray "?" must still be
// refused rather than taken for a bus whose rows all dead-letter for want
// of a source.
func TestParseTarget_RefusesABusNameWhoseOptionsAreEmpty(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		"queue name, bare question mark": "orders?",
		"bus name, bare question mark":   "domain?",
		"bus name, empty pairs":          "domain?&",
		"bus name, only separators":      "domain?&&",
	}
	for name, in := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := delivery.ParseTarget(in)
			require.Error(t, err, "taken for %+v", got)
			_, err = delivery.ParseRoutes("r=" + in)
			require.Error(t, err)
		})
	}
}

// A queue URL carrying a fragment or credentials names no queue as SQS
// knows it: every SendMessageBatch to it fails as a whole, over and over.
// Worse, "…/orders.fifo#x" passes as a standard queue (IsFIFO looks at the
// whole string), so the route must be named without .fifo and its rows are
// staged without a group.
func TestParseTarget_RefusesQueueURLsWithAFragmentOrCredentials(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		"fragment":               "https://sqs.us-east-1.amazonaws.com/123456789012/orders#x",
		"fragment on a fifo url": "https://sqs.us-east-1.amazonaws.com/123456789012/orders.fifo#x",
		"empty fragment":         "https://sqs.us-east-1.amazonaws.com/123456789012/orders.fifo#",
		"user info":              "https://user:pw@sqs.us-east-1.amazonaws.com/123456789012/orders",
	}
	for name, in := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := delivery.ParseTarget(in)
			require.Error(t, err, "taken for %+v", got)
		})
	}
}
