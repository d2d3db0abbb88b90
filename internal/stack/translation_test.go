package stack_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/stack"
)

// The tests on SAM's own translation of the template read what
// CloudFormation is really asked to create: generated resources, their
// names and properties.

var translation struct {
	once sync.Once
	raw  []byte
	err  error
}

// translatedRaw is the template's SAM translation, made once per test run.
func translatedRaw(t *testing.T) []byte {
	t.Helper()
	translation.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		translation.raw, translation.err = stack.Translate(ctx, templatePath)
	})
	require.NoError(t, translation.err)
	return translation.raw
}

// translated is the SAM translation with its intrinsics resolved,
// ExampleTargets "true" unless overrides set it (as load).
func translated(t *testing.T, overrides map[string]string) *stack.Template {
	t.Helper()
	tpl, err := stack.Parse(translatedRaw(t), withExamples(overrides))
	require.NoError(t, err)
	return tpl
}

// resourceOf decodes the one resource named logical of type typ.
func resourceOf(t *testing.T, tpl *stack.Template, logical, typ string, v any) {
	t.Helper()
	r, ok := tpl.Resources[logical]
	require.True(t, ok, "no resource %s", logical)
	require.Equal(t, typ, r.Type, logical)
	require.NoError(t, r.Decode(v), logical)
}
