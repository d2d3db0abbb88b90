package eventfilter_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/eventfilter"
)

func event(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(s), &m))
	return m
}

func TestPattern_MatchesLikeLambda(t *testing.T) {
	t.Parallel()
	tests := []struct {
		pattern, event string
		want           bool
	}{
		{`{"eventName":["INSERT"]}`, `{"eventName":"INSERT"}`, true},
		{`{"eventName":["INSERT"]}`, `{"eventName":"MODIFY"}`, false},
		{`{"eventName":["INSERT","MODIFY"]}`, `{"eventName":"MODIFY"}`, true},
		{`{"eventName":["INSERT"]}`, `{}`, false},
		{`{"a":{"b":{"S":["x"]}}}`, `{"a":{"b":{"S":"x"}}}`, true},
		{`{"a":{"b":{"S":["x"]}}}`, `{"a":{"b":{"N":"1"}}}`, false},
		{`{"a":{"b":{"S":["x"]}}}`, `{"a":{}}`, false},
		{`{"n":[1]}`, `{"n":1}`, true},
		{`{"n":[1]}`, `{"n":"1"}`, false},
		{`{"k":[{"prefix":"ord"}]}`, `{"k":"order-1"}`, true},
		{`{"k":[{"prefix":"ord"}]}`, `{"k":"event-1"}`, false},
		{`{"k":[{"exists":true}]}`, `{"k":"x"}`, true},
		{`{"k":[{"exists":false}]}`, `{"k":"x"}`, false},
		{`{"k":[{"exists":false}]}`, `{}`, true},
		{`{"k":[{"anything-but":["a"]}]}`, `{"k":"b"}`, true},
		{`{"k":[{"anything-but":["a"]}]}`, `{"k":"a"}`, false},
		{`{"tags":["x"]}`, `{"tags":["y","x"]}`, true},
	}
	for _, tt := range tests {
		p, err := eventfilter.Compile(tt.pattern)
		require.NoError(t, err)
		require.Equal(t, tt.want, p.Match(event(t, tt.event)), "%s ~ %s", tt.pattern, tt.event)
	}
}

func TestCompile_RejectsWhatItCannotEvaluate(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{`not json`, `{"a":"x"}`, `{"a":[{"numeric":[">",1]}]}`, `{"a":[{"suffix":"x"}]}`} {
		_, err := eventfilter.Compile(bad)
		require.Error(t, err, bad)
	}
}

func TestMatchAny_OrsFilters(t *testing.T) {
	t.Parallel()
	a, _ := eventfilter.Compile(`{"k":["a"]}`)
	b, _ := eventfilter.Compile(`{"k":["b"]}`)
	require.True(t, eventfilter.MatchAny([]eventfilter.Pattern{a, b}, map[string]any{"k": "b"}))
	require.False(t, eventfilter.MatchAny([]eventfilter.Pattern{a, b}, map[string]any{"k": "c"}))
	require.False(t, eventfilter.MatchAny(nil, map[string]any{"k": "c"}))
}
