package config

import (
	"maps"

	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/version"
)

// Published is what a dispatcher with this configuration publishes in its
// table (dynamo.Publish): its routes, ordered routes with their
// dead-head policies, shards, message size limit, unsure wait and release
// version.
func (c Config) Published() dynamo.Published {
	ordered := make(map[string]string, len(c.Policy.Ordered))
	for route, dh := range c.Policy.Ordered {
		ordered[route] = string(dh)
	}
	routes := maps.Clone(map[string]string(c.Routes))
	if routes == nil {
		routes = map[string]string{}
	}
	return dynamo.Published{Routes: routes, Ordered: ordered, Shards: c.Store.Shards, MaxMessageBytes: c.MaxMessageBytes, UnsureWait: c.Policy.UnsureWait(), Lean: c.Lean,
		Version: version.Version}
}
