package handler

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/outflowhq/outflow/internal/dynamo"
)

// publisher publishes the function's configuration in its table
// (dynamo.Publish): one consistent read, and a write only when the
// configuration changed. It runs at the first invocation, with that
// invocation's context, and again at later ones: the sweep at each (one
// read a scheduled minute), the wake at most once a minute. Not once per
// cold start: a deploy updates the functions one after the other, so an
// environment of the old version can cold-start and publish after the new
// one did, and the new one must put its own back (review 25: the old
// wake's skip stayed published while the dispatcher held groups under
// block). A failure is logged and never fails the invocation, since the
// rows are delivered either way; only producers and the CLI miss the
// check until the next try.
type publisher struct {
	api   dynamo.ConfigAPI
	table string
	// by names the function in the item (AWS_LAMBDA_FUNCTION_NAME).
	by   string
	what dynamo.Published
	// checked is when the item was last found or made current (Unix
	// nanoseconds; 0: never).
	checked atomic.Int64
	// leanNoted is whether this instance has recorded lean in the
	// backstop item (Store.NoteLean).
	leanNoted atomic.Bool
}

// republishEvery is how often the wake checks the published item again.
const republishEvery = time.Minute

// publish publishes unless the item was made current less than every ago;
// see publisher.
func (rt *Runtime) publish(ctx context.Context, every time.Duration) {
	p := rt.publisher
	now := time.Now()
	if p == nil || (p.checked.Load() != 0 && now.Sub(time.Unix(0, p.checked.Load())) < every) {
		return
	}
	if p.what.Lean && rt.Backstop != nil && !p.leanNoted.Load() {
		// Lean is on from here: the backstop must run even if lean is
		// switched off before a scheduled sweep sees it on. Noted once
		// per instance, whether or not this publish writes (an earlier
		// one that wrote may have failed to note it), and tried again at
		// each check until it is.
		if err := rt.Backstop.NoteLean(ctx, now); err != nil {
			rt.Log.WarnContext(ctx, "noting lean for the backstop failed; tried again at the next check", "error", err)
		} else {
			p.leanNoted.Store(true)
		}
	}
	wrote, err := dynamo.Publish(ctx, p.api, p.table, p.what, p.by, now)
	if err != nil {
		rt.Log.WarnContext(ctx, "publish configuration failed; producers and the CLI check rows against the one published before, if any", "error", err)
		return
	}
	p.checked.Store(now.UnixNano())
	if wrote {
		rt.Log.InfoContext(ctx, "published configuration", "table", p.table, "routes", p.what.RoutesString(), "ordered", p.what.OrderedString(),
			"shards", p.what.Shards, "max_message_bytes", p.what.MaxMessageBytes)
	}
}
