package outflow

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/target"
)

// Published is the configuration the dispatcher runs with, as its
// functions publish it in the outbox table (one item, at the first
// invocation after a cold start, written when it changed). Apply turns it
// into a producer Config, so a producer checks rows against what the
// dispatcher will do rather than a copy of its settings.
// docs/published-config.md describes the item for other languages.
type Published struct {
	// Table is the table it was read from.
	Table string
	// Routes maps each route name to its target, as the dispatcher's
	// OUTFLOW_ROUTES.
	Routes map[string]string
	// Ordered maps each ordered route to what a dead-lettered head does to
	// its group, "block" or "skip", as OUTFLOW_ORDERED.
	Ordered map[string]string
	// Shards is the dispatcher's OUTFLOW_SHARDS.
	Shards int
	// MaxMessageBytes is the dispatcher's OUTFLOW_MAX_MESSAGE_BYTES.
	MaxMessageBytes int
	// Lean is the dispatcher's OUTFLOW_LEAN: unordered rows due at once
	// are staged outside the due index (Config.Lean).
	Lean bool
	// Version is the dispatcher's release version, "" for a dispatcher
	// before 1.0.0. Apply never compares it: any 1.x producer stages rows
	// any 1.x dispatcher delivers (docs/compatibility.md).
	Version string
	// Revision counts the item's writes, from 1; PublishedAt and
	// PublishedBy say when and by which function the last one was.
	Revision    int64
	PublishedAt time.Time
	PublishedBy string
}

var (
	// ErrNotPublished is returned by LoadPublished when the table holds no
	// published configuration: no dispatcher function has run on it yet.
	ErrNotPublished = dynamo.ErrNotPublished
	// ErrPublishedMismatch is returned by Published.Apply when the Config
	// sets a value the dispatcher does not run with.
	ErrPublishedMismatch = errors.New("differs from the dispatcher's published configuration")
)

// LoadPublished reads the dispatcher's published configuration from
// table, with one strongly consistent GetItem, through the client you give
// NewProducer. A table with none gives an error wrapping ErrNotPublished:
// fall back to a Config of your own, or refuse to start, as suits you. A
// table that does not exist gives an error that names it, and the region
// and endpoint it was looked for in where client is (or embeds) a
// *dynamodb.Client: `table "x": not found in region eu-west-1
// (ResourceNotFoundException)`, wrapping the SDK's
// *types.ResourceNotFoundException.
func LoadPublished(ctx context.Context, client DynamoDB, table string) (Published, error) {
	p, err := dynamo.ReadPublished(ctx, client, table)
	if err != nil {
		return Published{}, err
	}
	return Published{Table: table, Routes: p.Routes, Ordered: p.Ordered, Shards: p.Shards, MaxMessageBytes: p.MaxMessageBytes, Lean: p.Lean, Version: p.Version,
		Revision: p.Revision, PublishedAt: p.PublishedAt, PublishedBy: p.PublishedBy}, nil
}

// Apply returns cfg with what p publishes filled in: Table, Shards,
// MaxMessageBytes, Routes, Ordered and Lean, where cfg leaves them zero (a nil
// Ordered; an empty non-nil one says "none", and is checked; a Lean
// the dispatcher does not run is a mismatch, since no backstop would
// find the rows its stream missed). A field
// cfg sets must agree with p, or Apply fails with an error wrapping
// ErrPublishedMismatch that names each difference: a producer whose
// settings differ from the dispatcher's would stage rows it cannot
// deliver, or in no order it keeps. The Config returned remembers that
// its Routes are the published ones, so a producer made with it refuses a
// row of another route naming the table and the routes published there
// (ErrNoRoute); compare two Configs field by field, not as wholes.
func (p Published) Apply(cfg Config) (Config, error) {
	var diffs []string
	if cfg.Table == "" {
		cfg.Table = p.Table
	} else if p.Table != "" && cfg.Table != p.Table {
		diffs = append(diffs, fmt.Sprintf("table: published in %s, Config has %s", p.Table, cfg.Table))
	}
	if cfg.Shards == 0 {
		cfg.Shards = p.Shards
	} else if cfg.Shards != p.Shards {
		diffs = append(diffs, fmt.Sprintf("Shards: published %d, Config has %d", p.Shards, cfg.Shards))
	}
	if cfg.MaxMessageBytes == 0 {
		cfg.MaxMessageBytes = p.MaxMessageBytes
	} else if cfg.MaxMessageBytes != p.MaxMessageBytes {
		diffs = append(diffs, fmt.Sprintf("MaxMessageBytes: published %d, Config has %d", p.MaxMessageBytes, cfg.MaxMessageBytes))
	}
	published := dynamo.Published{Routes: p.Routes}
	if strings.TrimSpace(cfg.Routes) == "" {
		cfg.Routes = published.RoutesString()
	} else if routes, err := target.ParseRoutes(cfg.Routes); err != nil {
		return cfg, fmt.Errorf("routes: %w", err)
	} else {
		diffs = append(diffs, published.Diff(dynamo.Published{Routes: routes})...)
	}
	ordered := slices.Sorted(maps.Keys(p.Ordered))
	if cfg.Ordered == nil {
		cfg.Ordered = ordered
	} else if mine := slices.Compact(slices.Sorted(slices.Values(cfg.Ordered))); !slices.Equal(mine, ordered) {
		diffs = append(diffs, fmt.Sprintf("Ordered: published %s, Config has %s", orNone(ordered), orNone(mine)))
	}
	switch {
	case !cfg.Lean:
		cfg.Lean = p.Lean
	case !p.Lean:
		diffs = append(diffs, "Lean: the dispatcher does not run lean, Config has Lean")
	}
	if len(diffs) > 0 {
		return cfg, fmt.Errorf("table %s: %w: %s", cfg.Table, ErrPublishedMismatch, strings.Join(diffs, "; "))
	}
	// The routes are the published ones now: a row of another route is
	// refused naming the table they were published in.
	cfg.publishedIn, cfg.publishedRoutes = cfg.Table, maps.Clone(p.Routes)
	return cfg, nil
}

func orNone(routes []string) string {
	if len(routes) == 0 {
		return "none"
	}
	return strings.Join(routes, ",")
}

// checkOrderedRouted refuses an ordered route that the routes given do not
// name: rows of it could never be staged (ErrNoRoute), and the mismatch
// says the two settings were copied from different places.
func checkOrderedRouted(ordered []string, targets map[string]target.Target) error {
	if targets == nil {
		return nil
	}
	for _, q := range ordered {
		if _, ok := targets[q]; !ok {
			return fmt.Errorf("ordered route %q is not in the routes given (%s)", q, strings.Join(slices.Sorted(maps.Keys(targets)), ","))
		}
	}
	return nil
}
