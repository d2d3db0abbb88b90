package config_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/config"
)

// TestLoad_RefusesAQueueOrTopicNameWhereItsAddressBelongs: before targets
// other than queues, "orders=nope" was refused at init ("is not an absolute
// queue URL") and rows waited safely in the table. Now any bare word is read
// as an EventBridge bus name, so a queue or topic written by name instead of
// URL or ARN starts the functions, and every row of the route is
// dead-lettered at its first attempt ("no source") or, with rows that carry
// a source, retried against a bus that does not exist until MaxAttempts.
// A bus given by bare name with no source and detail-type options cannot
// be told from such a typo; Load should refuse it (ask for the bus ARN,
// or for the route's options), as it refused the typo before.
func TestLoad_RefusesAQueueOrTopicNameWhereItsAddressBelongs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, routes string
		wantErr      bool
	}{
		{"a queue's name", "orders=orders-queue", true},
		{"a topic's name", "notices=notices", true},
		{"a bus by name with its options", "domain=my-bus?source=app&detail-type=Changed", false},
		{"a bus by ARN", "domain=arn:aws:events:us-east-1:123456789012:event-bus/my-bus", false},
		{"a queue by URL", "orders=https://sqs.us-east-1.amazonaws.com/123456789012/orders-queue", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			kv := minimal()
			kv["OUTFLOW_ROUTES"] = tt.routes
			_, err := config.Load(env(kv))
			if tt.wantErr {
				require.Error(t, err, "%s is taken for an event bus", tt.routes)
				return
			}
			require.NoError(t, err)
		})
	}
}
