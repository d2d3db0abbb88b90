package stack

import (
	"fmt"
	"strings"
)

// Substitute replaces the ${Name} and ${Name.Attr} placeholders that
// resolving left in s with values, and fails on any it cannot fill, so a
// half-provisioned environment variable never reaches a function.
func Substitute(s string, values map[string]string) (string, error) {
	var missing []string
	out := subVar.ReplaceAllStringFunc(s, func(m string) string {
		name := m[2 : len(m)-1]
		if v, ok := values[name]; ok {
			return v
		}
		missing = append(missing, name)
		return m
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("no value for %s in %q", strings.Join(missing, ", "), s)
	}
	return out, nil
}
