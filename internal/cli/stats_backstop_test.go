package cli_test

import (
	"context"
	"encoding/json"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
)

// putLean writes a lean row as a lean producer stages it: pending, due
// at its staging time, and no shard, so in no due index.
func (e *env) putLean(t *testing.T, key string, created time.Time) {
	t.Helper()
	at := &ddbtypes.AttributeValueMemberN{Value: strconv.FormatInt(created.UnixMilli(), 10)}
	_, err := awstest.DynamoDB(t).PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(e.table), Item: map[string]ddbtypes.AttributeValue{
		"pk": &ddbtypes.AttributeValueMemberS{Value: key}, "queue": &ddbtypes.AttributeValueMemberS{Value: "orders"},
		"payload": &ddbtypes.AttributeValueMemberS{Value: "x"}, "status": &ddbtypes.AttributeValueMemberS{Value: "pending"},
		"attempt": &ddbtypes.AttributeValueMemberN{Value: "0"}, "created_at": at, "due_at": at,
	}})
	require.NoError(t, err)
}

// backstopStats is what outflow stats --output json says of the backstop
// and of the pending rows.
type backstopStats struct {
	Total struct {
		Pending int `json:"pending"`
	} `json:"total"`
	Backstop *struct {
		LastPass        int       `json:"last_pass"`
		ThisPass        int       `json:"this_pass"`
		Total           int       `json:"total"`
		LongestWaitMs   int64     `json:"longest_wait_ms"`
		PassStarted     time.Time `json:"pass_started"`
		LastPassStarted time.Time `json:"last_pass_started"`
		LastPassEnded   time.Time `json:"last_pass_ended"`
		LeanAt          time.Time `json:"lean_at"`
	} `json:"backstop"`
}

// Lean rows the stream missed are in no index, so in no count, until the
// sweep's backstop scans the table and puts them in the due index. stats
// reads what the backstop found from its item, as it reads the audit's:
// nothing while it never ran; then its counts in the pass under way, in
// the last full pass and in all, the longest wait, and when its passes
// ran, in the table and in the JSON.
func TestStats_ReportsWhatTheBackstopFoundOfLeanRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	staged := time.Now().Add(-2 * time.Minute).Truncate(time.Millisecond) // as the item holds it
	e.putLean(t, "lean-1", staged)
	e.putLean(t, "lean-2", staged)

	stats := func() (backstopStats, map[string]json.RawMessage) {
		out := e.ok(t, "stats", "--output", "json")
		var st backstopStats
		require.NoError(t, json.Unmarshal([]byte(out), &st))
		var raw map[string]json.RawMessage
		require.NoError(t, json.Unmarshal([]byte(out), &raw))
		return st, raw
	}
	st, raw := stats()
	require.Zero(t, st.Total.Pending, "a lean row is in no due index")
	require.NotContains(t, raw, "backstop", "the backstop never ran")
	require.Contains(t, raw, "stray", "the audit's counts are there as ever")
	require.NotContains(t, e.ok(t, "stats"), "backstop")

	b, err := dynamo.NewBackstop(awstest.DynamoDB(t), dynamo.Config{Table: e.table, Shards: 4}, 15*time.Second, true)
	require.NoError(t, err)
	// One item a run: the first run finds one row and leaves its pass
	// under way.
	b.Pages, b.PageSize = 1, 1
	first := time.Now()
	res, err := b.Run(ctx, first)
	require.NoError(t, err)
	require.Equal(t, 1, res.Indexed)
	require.False(t, res.PassDone)

	st, _ = stats()
	require.Equal(t, 1, st.Total.Pending, "the row found is in the due index")
	require.NotNil(t, st.Backstop)
	require.Equal(t, 0, st.Backstop.LastPass)
	require.Equal(t, 1, st.Backstop.ThisPass)
	require.Equal(t, 1, st.Backstop.Total)
	require.Equal(t, first.Sub(staged).Milliseconds(), st.Backstop.LongestWaitMs)
	require.True(t, st.Backstop.PassStarted.Equal(first.Truncate(time.Millisecond)), "%s, want %s", st.Backstop.PassStarted, first)
	require.True(t, st.Backstop.LastPassStarted.IsZero(), "no full pass yet")
	require.True(t, st.Backstop.LastPassEnded.IsZero(), "no full pass yet")
	require.True(t, st.Backstop.LeanAt.Equal(first.Truncate(time.Millisecond)))
	table := oneSpace(e.ok(t, "stats"))
	require.Contains(t, table, "\nlean rows found by the backstop 0 last pass, 1 this pass, 1 in all\n")
	require.Contains(t, table, "\nlongest wait of a row it found "+strconv.FormatInt(st.Backstop.LongestWaitMs, 10)+"ms\n")
	require.Contains(t, table, "\nbackstop's last full pass none yet\n")
	require.Contains(t, table, "\nbackstop's pass under way began "+first.UTC().Format(time.RFC3339)+"\n")

	// The next run, with pages to spare, finds the other row and ends the
	// pass.
	b.Pages, b.PageSize = 10, 1000
	second := first.Add(time.Second)
	res, err = b.Run(ctx, second)
	require.NoError(t, err)
	require.Equal(t, 1, res.Indexed)
	require.True(t, res.PassDone)

	st, _ = stats()
	require.Equal(t, 2, st.Total.Pending)
	require.Equal(t, 2, st.Backstop.LastPass)
	require.Equal(t, 0, st.Backstop.ThisPass)
	require.Equal(t, 2, st.Backstop.Total)
	require.Equal(t, second.Sub(staged).Milliseconds(), st.Backstop.LongestWaitMs, "the second row had waited longer")
	require.True(t, st.Backstop.PassStarted.IsZero(), "no pass under way")
	require.True(t, st.Backstop.LastPassStarted.Equal(first.Truncate(time.Millisecond)))
	require.True(t, st.Backstop.LastPassEnded.Equal(second.Truncate(time.Millisecond)))
	table = e.ok(t, "stats")
	t.Logf("outflow stats:\n%s", table)
	table = oneSpace(table)
	require.Contains(t, table, "\nlean rows found by the backstop 2 last pass, 0 this pass, 2 in all\n")
	require.Contains(t, table, "\nbackstop's last full pass "+first.UTC().Format(time.RFC3339)+" to "+second.UTC().Format(time.RFC3339)+"\n")
	require.NotContains(t, table, "pass under way")
}

// oneSpace is s with each run of spaces one space: the table's columns
// are as wide as their longest cell.
func oneSpace(s string) string {
	return regexp.MustCompile(` +`).ReplaceAllString(s, " ")
}
