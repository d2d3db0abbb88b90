package delivery

import (
	"fmt"
	"net/url"
	"sort"
	"strings"
)

// Routes maps a row's queue name to the URL of the SQS queue it goes to.
type Routes map[string]string

// ParseRoutes reads routes written as "name=url,name=url". Names and URLs
// must be non-empty, URLs absolute, and names unique.
func ParseRoutes(s string) (Routes, error) {
	routes := Routes{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, raw, ok := strings.Cut(part, "=")
		name, raw = strings.TrimSpace(name), strings.TrimSpace(raw)
		if !ok || name == "" || raw == "" {
			return nil, fmt.Errorf("route %q: want name=url", part)
		}
		if u, err := url.Parse(raw); err != nil || !u.IsAbs() || u.Host == "" {
			return nil, fmt.Errorf("route %q: %q is not an absolute queue URL", name, raw)
		}
		if IsFIFO(raw) != strings.HasSuffix(name, ".fifo") {
			return nil, fmt.Errorf("route %q: a route name ends in .fifo exactly when its queue is FIFO, so producers know to set a group", name)
		}
		if _, dup := routes[name]; dup {
			return nil, fmt.Errorf("route %q: given twice", name)
		}
		routes[name] = raw
	}
	return routes, nil
}

// String writes routes in the form ParseRoutes reads, sorted by name.
func (r Routes) String() string {
	parts := make([]string, 0, len(r))
	for name, u := range r {
		parts = append(parts, name+"="+u)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// IsFIFO reports whether a queue URL names a FIFO queue.
func IsFIFO(queueURL string) bool { return strings.HasSuffix(queueURL, ".fifo") }
