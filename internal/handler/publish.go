package handler

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/outflowhq/outflow/internal/dynamo"
)

// publisher publishes the function's configuration in its table once per
// cold start (dynamo.Publish): one consistent read, and a write only when
// the configuration changed. It runs at the first invocation, with that
// invocation's context, and again at each later one until it succeeds: a
// failure is logged and never fails the invocation, since the rows are
// delivered either way; only producers and the CLI miss the check.
type publisher struct {
	api   dynamo.ConfigAPI
	table string
	// by names the function in the item (AWS_LAMBDA_FUNCTION_NAME).
	by   string
	what dynamo.Published
	done atomic.Bool
}

// publish publishes, unless it has already; see publisher.
func (rt *Runtime) publish(ctx context.Context) {
	p := rt.publisher
	if p == nil || p.done.Load() {
		return
	}
	wrote, err := dynamo.Publish(ctx, p.api, p.table, p.what, p.by, time.Now())
	if err != nil {
		rt.Log.WarnContext(ctx, "publish configuration failed; producers and the CLI check rows against the one published before, if any", "error", err)
		return
	}
	p.done.Store(true)
	if wrote {
		rt.Log.InfoContext(ctx, "published configuration", "table", p.table, "routes", p.what.RoutesString(), "ordered", p.what.OrderedString(),
			"shards", p.what.Shards, "max_message_bytes", p.what.MaxMessageBytes)
	}
}
