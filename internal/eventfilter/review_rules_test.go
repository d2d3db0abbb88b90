package eventfilter_test

import (
	"encoding/json"
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/eventfilter"
)

// Held: the wake's FilterCriteria in template.yaml passes a staged row's
// INSERT only: neither the done update nor the TTL delete of a kept row
// (nor a purge's return to pending) wakes the wake Lambda.
func TestRev_TheWakeFilterIgnoresDoneUpdatesTTLDeletesAndPurges(t *testing.T) {
	t.Parallel()
	tpl, err := os.ReadFile("../../template.yaml")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)Pattern: '(\{.*\})'`).FindAllSubmatch(tpl, -1)
	require.Len(t, m, 1)
	p, err := eventfilter.Compile(string(m[0][1]))
	require.NoError(t, err)
	rec := func(s string) map[string]any {
		var v map[string]any
		require.NoError(t, json.Unmarshal([]byte(s), &v))
		return v
	}
	require.True(t, p.Match(rec(`{"eventName":"INSERT","dynamodb":{"NewImage":{"status":{"S":"pending"}}}}`)))
	for _, r := range []string{
		`{"eventName":"MODIFY","dynamodb":{"NewImage":{"status":{"S":"done"}}}}`,
		`{"eventName":"REMOVE","userIdentity":{"type":"Service","principalId":"dynamodb.amazonaws.com"},"dynamodb":{}}`,
		`{"eventName":"MODIFY","dynamodb":{"NewImage":{"status":{"S":"pending"},"closed":{"S":"purged"}}}}`,
	} {
		require.False(t, p.Match(rec(r)), r)
	}
}
