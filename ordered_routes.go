package outflow

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

// ErrOrderUnknown is returned for a row of a FIFO route when the
// producer's Config does not list its ordered routes and the table holds
// no published configuration to say: staged without a place, a row of an
// ordered route would reach its consumer in no order.
var ErrOrderUnknown = errors.New("whether the route is ordered is unknown")

// publishedOrderTTL is how long a producer trusts the ordered routes it
// read from the published configuration before it reads them again, as
// the wake re-reads its own: a route listed as ordered later is seen
// within it.
const publishedOrderTTL = time.Minute

// orderedRoutes is which routes a producer stages as ordered: the ones
// its Config lists, or, with none listed (a nil Config.Ordered), the
// ones the dispatcher publishes in the table, read when first needed and
// again once a minute.
type orderedRoutes struct {
	fixed map[string]bool // nil: read from the table
	read  func(ctx context.Context) (map[string]bool, error)

	mu  sync.Mutex
	set map[string]bool
	at  time.Time
	now func() time.Time
}

// newOrderedRoutes lists routes, or reads them through read when routes is
// nil.
func newOrderedRoutes(routes []string, read func(ctx context.Context) (map[string]bool, error)) (*orderedRoutes, error) {
	if routes == nil {
		return &orderedRoutes{read: read, now: time.Now}, nil
	}
	fixed := map[string]bool{}
	for _, q := range routes {
		if !outbox.FIFORoute(q) {
			return nil, fmt.Errorf("ordered route %q: only FIFO routes (names ending in .fifo) keep an order per group", q)
		}
		fixed[q] = true
	}
	return &orderedRoutes{fixed: fixed}, nil
}

// ordered reports whether queue is an ordered route. Only a FIFO route
// can be one, so only a FIFO route's answer needs the published
// configuration; without one it is ErrOrderUnknown.
func (o *orderedRoutes) ordered(ctx context.Context, queue string) (bool, error) {
	if o.fixed != nil {
		return o.fixed[queue], nil
	}
	if !outbox.FIFORoute(queue) {
		return false, nil
	}
	set, err := o.current(ctx)
	if err != nil {
		return false, fmt.Errorf("route %s: %w: %w", queue, ErrOrderUnknown, err)
	}
	return set[queue], nil
}

// known reports whether queue is an ordered route as last read, without
// reading: for describing a refused transaction.
func (o *orderedRoutes) known(queue string) bool {
	if o.fixed != nil {
		return o.fixed[queue]
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.set[queue]
}

// current returns the published ordered routes, read again once the last
// reading is a minute old. A failed read is not kept: the next call tries
// again.
func (o *orderedRoutes) current(ctx context.Context) (map[string]bool, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.set != nil && o.now().Sub(o.at) < publishedOrderTTL {
		return o.set, nil
	}
	set, err := o.read(ctx)
	if err != nil {
		if errors.Is(err, dynamo.ErrNotPublished) {
			err = fmt.Errorf("%w: list the ordered routes in Config.Ordered (an empty list for none), or run the dispatcher once to publish them", err)
		}
		return nil, err
	}
	o.set, o.at = set, o.now()
	return set, nil
}
