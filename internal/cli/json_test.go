package cli

import (
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/local"
	"github.com/outflowhq/outflow/internal/operate"
	"github.com/outflowhq/outflow/internal/telemetry"
)

// snakeCase is the one naming style of --output json keys.
var snakeCase = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// jsonKeys checks that every field of t that encoding/json writes, in
// nested and embedded structs too, has an explicit snake_case name, and
// returns the names it saw.
func jsonKeys(t *testing.T, typ reflect.Type, path string, seen map[reflect.Type]bool) []string {
	t.Helper()
	for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Map {
		typ = typ.Elem()
	}
	if typ.Kind() != reflect.Struct || seen[typ] || typ.PkgPath() == "time" {
		return nil
	}
	seen[typ] = true
	var keys []string
	for i := range typ.NumField() {
		f := typ.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" {
			keys = append(keys, jsonKeys(t, f.Type, path, seen)...)
			continue
		}
		require.Regexp(t, snakeCase, name, "%s.%s has no snake_case json name", path, f.Name)
		keys = append(keys, name)
		keys = append(keys, jsonKeys(t, f.Type, path+"."+name, seen)...)
	}
	return keys
}

// TestOutputJSON_EveryCommandUsesSnakeCaseKeys covers the value each
// command gives emit.
func TestOutputJSON_EveryCommandUsesSnakeCaseKeys(t *testing.T) {
	t.Parallel()
	outputs := map[string]any{
		"dead list": []operate.DeadLetter{},
		"dead show": operate.Row{},
		"dead bulk": operate.Result{},
		"stats":     statsReport{},
		"sweep":     telemetry.Summary{},
		"enqueue":   enqueued{},
		"local":     local.DemoReport{},
	}
	for cmd, v := range outputs {
		t.Run(cmd, func(t *testing.T) {
			t.Parallel()
			require.NotEmpty(t, jsonKeys(t, reflect.TypeOf(v), cmd, map[reflect.Type]bool{}))
		})
	}
	// The history dead show prints, which once went out as At, Attempt
	// and Message.
	require.Subset(t, jsonKeys(t, reflect.TypeOf(operate.AttemptError{}), "errors", map[reflect.Type]bool{}), []string{"at", "attempt", "message", "unsure"})
}
