// Package eventfilter evaluates Lambda event-source filter patterns
// (FilterCriteria) against events, so the local runner hands the wake
// exactly the stream records Lambda would. It supports the parts of the
// pattern language that stream filters use: exact values, nested objects,
// and the prefix, exists and anything-but operators.
package eventfilter

import (
	"encoding/json"
	"fmt"
)

// Pattern is one compiled filter pattern.
type Pattern struct{ root map[string]any }

// Compile parses a filter pattern, rejecting operators it does not know,
// so an unsupported filter fails loudly instead of matching wrongly.
func Compile(pattern string) (Pattern, error) {
	var root map[string]any
	if err := json.Unmarshal([]byte(pattern), &root); err != nil {
		return Pattern{}, fmt.Errorf("filter pattern %q: %w", pattern, err)
	}
	if err := check(root); err != nil {
		return Pattern{}, fmt.Errorf("filter pattern %q: %w", pattern, err)
	}
	return Pattern{root: root}, nil
}

func check(p map[string]any) error {
	for k, v := range p {
		switch x := v.(type) {
		case map[string]any:
			if err := check(x); err != nil {
				return err
			}
		case []any:
			for _, e := range x {
				op, ok := e.(map[string]any)
				if !ok {
					continue
				}
				for name := range op {
					switch name {
					case "prefix", "exists", "anything-but":
					default:
						return fmt.Errorf("key %q: unsupported operator %q", k, name)
					}
				}
			}
		default:
			return fmt.Errorf("key %q: want an array of values or an object, got %v", k, v)
		}
	}
	return nil
}

// Match reports whether the event (a JSON-shaped value: maps, slices,
// strings, float64, bools) matches the pattern.
func (p Pattern) Match(event map[string]any) bool { return matchObject(p.root, event) }

// MatchAny reports whether the event matches any of the patterns; Lambda
// ORs the filters of one mapping.
func MatchAny(patterns []Pattern, event map[string]any) bool {
	for _, p := range patterns {
		if p.Match(event) {
			return true
		}
	}
	return false
}

func matchObject(pattern, event map[string]any) bool {
	for k, pv := range pattern {
		ev, present := event[k]
		switch x := pv.(type) {
		case map[string]any:
			sub, ok := ev.(map[string]any)
			if !present || !ok || !matchObject(x, sub) {
				return false
			}
		case []any:
			if !matchValues(x, ev, present) {
				return false
			}
		}
	}
	return true
}

func matchValues(allowed []any, ev any, present bool) bool {
	values := []any{ev}
	if l, ok := ev.([]any); ok {
		values = l
	}
	for _, a := range allowed {
		if op, ok := a.(map[string]any); ok {
			if matchOperator(op, values, present) {
				return true
			}
			continue
		}
		if !present {
			continue
		}
		for _, v := range values {
			if equal(a, v) {
				return true
			}
		}
	}
	return false
}

func matchOperator(op map[string]any, values []any, present bool) bool {
	for name, arg := range op {
		switch name {
		case "exists":
			want, _ := arg.(bool)
			return present == want
		case "prefix":
			prefix, _ := arg.(string)
			for _, v := range values {
				if s, ok := v.(string); ok && present && len(s) >= len(prefix) && s[:len(prefix)] == prefix {
					return true
				}
			}
		case "anything-but":
			if !present {
				return false
			}
			excluded, ok := arg.([]any)
			if !ok {
				excluded = []any{arg}
			}
			for _, v := range values {
				for _, x := range excluded {
					if equal(x, v) {
						return false
					}
				}
			}
			return true
		}
	}
	return false
}

func equal(a, b any) bool {
	return fmt.Sprint(a) == fmt.Sprint(b) && fmt.Sprintf("%T", a) == fmt.Sprintf("%T", b)
}
