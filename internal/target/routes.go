package target

import (
	"fmt"
	"sort"
	"strings"
)

// Routes maps a row's queue name (the route name) to its target: an SQS
// queue URL, an SNS topic ARN, or an EventBridge bus ARN or name with its
// options, as ParseTarget reads them.
type Routes map[string]string

// ParseRoutes reads routes written as "name=target,name=target". Names
// must be non-empty and unique, targets valid (ParseTarget), and a name
// ends in .fifo exactly when its target is a FIFO queue or topic.
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
			return nil, fmt.Errorf("route %q: want name=target", part)
		}
		t, err := ParseTarget(raw)
		if err != nil {
			return nil, fmt.Errorf("route %q: %w", name, err)
		}
		if t.FIFO != strings.HasSuffix(name, ".fifo") {
			return nil, fmt.Errorf("route %q: a route name ends in .fifo exactly when its queue or topic is FIFO, so producers know to set a group", name)
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

// Targets reads every route's target. Routes made by ParseRoutes always
// read; a map built by hand may not.
func (r Routes) Targets() (map[string]Target, error) {
	out := make(map[string]Target, len(r))
	for name, raw := range r {
		t, err := ParseTarget(raw)
		if err != nil {
			return nil, fmt.Errorf("route %q: %w", name, err)
		}
		out[name] = t
	}
	return out, nil
}
