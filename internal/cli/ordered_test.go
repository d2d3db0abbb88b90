package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow"
	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/cli"
	"github.com/outflowhq/outflow/internal/outbox"
)

// orderedEnv is an env with an ordered FIFO route, "events.fifo", under
// the given OUTFLOW_ORDERED, and a dispatcher whose message limit (1024
// bytes) refuses the head of a group staged with stageGroup.
type orderedEnv struct {
	*env
	events string
}

func newOrderedEnv(t *testing.T, ordered string) *orderedEnv {
	t.Helper()
	e := &orderedEnv{env: newEnv(t), events: awstest.NewQueue(t, true)}
	e.vars["OUTFLOW_ROUTES"] += ",events.fifo=" + e.events
	e.vars["OUTFLOW_ORDERED"] = ordered
	e.vars["OUTFLOW_MAX_MESSAGE_BYTES"] = "1024"
	return e
}

// stageGroup stages three rows of group g on events.fifo, in order, the
// first too large for the dispatcher's limit, and returns their keys.
func (e *orderedEnv) stageGroup(t *testing.T, g string) []string {
	t.Helper()
	p, err := outflow.NewProducer(awstest.DynamoDB(t), outflow.Config{Table: e.table, Shards: 4, Ordered: []string{"events.fifo"}})
	require.NoError(t, err)
	rows := make([]outflow.Row, 3)
	for i := range rows {
		body := fmt.Sprintf(`{"n":%d}`, i+1)
		if i == 0 {
			body = `{"n":1,"pad":"` + strings.Repeat("x", 2000) + `"}`
		}
		rows[i] = outflow.Row{Key: fmt.Sprintf("%s-%d", g, i+1), Queue: "events.fifo", Group: g, Payload: []byte(body)}
	}
	keys, err := p.Put(context.Background(), rows...)
	require.NoError(t, err)
	return keys
}

// summary is what outflow sweep --output json reports.
type summary struct {
	Delivered     int `json:"delivered"`
	DeadLettered  int `json:"dead_lettered"`
	Waiting       int `json:"waiting"`
	BlockedGroups int `json:"blocked_groups"`
}

func (e *orderedEnv) sweep(t *testing.T) summary {
	t.Helper()
	var s summary
	require.NoError(t, json.Unmarshal([]byte(e.ok(t, "sweep", "--output", "json")), &s))
	return s
}

// listed is a dead letter as dead list --output json prints it.
type listed struct {
	Key         string `json:"key"`
	Queue       string `json:"queue"`
	Group       string `json:"group"`
	Seq         int64  `json:"seq"`
	BlocksGroup *bool  `json:"blocks_group"`
}

func (e *orderedEnv) deadList(t *testing.T, extra ...string) map[string]listed {
	t.Helper()
	var list []listed
	require.NoError(t, json.Unmarshal([]byte(e.ok(t, append([]string{"dead", "list", "--output", "json"}, extra...)...)), &list))
	out := map[string]listed{}
	for _, d := range list {
		require.NotNil(t, d.BlocksGroup, "%s: blocks_group is always there", d.Key)
		out[d.Key] = d
	}
	return out
}

// blocked is what outflow stats --output json says of ordered groups.
type blocked struct {
	Groups *int   `json:"blocked_groups"`
	AgeMs  *int64 `json:"oldest_blocked_age_ms"`
}

func (e *orderedEnv) stats(t *testing.T, extra ...string) blocked {
	t.Helper()
	var b blocked
	require.NoError(t, json.Unmarshal([]byte(e.ok(t, append([]string{"stats", "--blocked", "--output", "json"}, extra...)...)), &b))
	require.NotNil(t, b.Groups, "stats reports blocked_groups")
	require.NotNil(t, b.AgeMs, "stats reports oldest_blocked_age_ms")
	return b
}

// sent is how many messages wait in the queue at url.
func sent(t *testing.T, url string) string {
	t.Helper()
	attrs, err := awstest.SQS(t).GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages},
	})
	require.NoError(t, err)
	return attrs.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)]
}

// receivedKeys receives want messages from url and returns their row keys
// in the order SQS gave them.
func receivedKeys(t *testing.T, url string, want int) []string {
	t.Helper()
	keys := awstest.ReceiveKeys(t, url, want, 10*time.Second)
	return keys
}

func TestOperator_ADeadHeadBlocksItsGroupUntilPurgedOrRedriven(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		// release unblocks the group, given the head's key.
		release func(t *testing.T, e *orderedEnv, head string) string
		// delivered is which rows of the group (indexes) go after it, a
		// purged head's place as the message closing it.
		delivered []int
	}{
		{"redriven once the cause is fixed", func(t *testing.T, e *orderedEnv, head string) string {
			delete(e.vars, "OUTFLOW_MAX_MESSAGE_BYTES") // the default fits the head
			return e.ok(t, "dead", "redrive", head)
		}, []int{0, 1, 2}},
		{"purged", func(t *testing.T, e *orderedEnv, head string) string {
			return e.ok(t, "dead", "purge", head, "--yes")
		}, []int{0, 1, 2}}, // the head's place goes as the message that closes it
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newOrderedEnv(t, "events.fifo") // block, the default policy
			e.deadLetters(t, "ghost", 1)         // an unordered dead letter beside the group
			keys := e.stageGroup(t, "g")

			s := e.sweep(t)
			require.Equal(t, 1, s.DeadLettered, "the head is too large for the dispatcher")
			require.Zero(t, s.Delivered)
			require.Equal(t, "0", sent(t, e.events), "rows 2 and 3 wait behind the dead head")
			s = e.sweep(t)
			require.Zero(t, s.Delivered)
			require.Equal(t, 1, s.BlockedGroups, "the sweep reports the blocked group")
			require.Positive(t, s.Waiting, "and the rows waiting behind it")
			for _, k := range keys[1:] {
				require.Equal(t, outbox.StatusPending, e.status(t, k))
			}

			dead := e.deadList(t)
			require.Len(t, dead, 2)
			head := dead[keys[0]]
			require.Equal(t, "g", head.Group)
			require.Equal(t, int64(1), head.Seq)
			require.True(t, *head.BlocksGroup)
			require.False(t, *dead["ghost-0000"].BlocksGroup, "an unordered dead letter blocks nothing")
			require.Empty(t, dead["ghost-0000"].Group)

			table := e.ok(t, "dead", "list")
			require.Contains(t, table, "BLOCKS")
			require.Regexp(t, `(?m)^`+keys[0]+`\s+events\.fifo\s+g\s+1\s+\S+\s+yes\s`, table)
			require.Regexp(t, `(?m)^ghost-0000\s+ghost\s+-\s+1\s+\S+\s+-\s`, table)

			var shown map[string]any
			require.NoError(t, json.Unmarshal([]byte(e.ok(t, "dead", "show", keys[0], "--output", "json")), &shown))
			require.Equal(t, "g", shown["group"])
			require.Equal(t, 1.0, shown["seq"])
			require.Equal(t, true, shown["blocks_group"])
			require.Contains(t, e.ok(t, "dead", "show", keys[0]), "blocks group")
			require.NoError(t, json.Unmarshal([]byte(e.ok(t, "dead", "show", "ghost-0000", "--output", "json")), &shown))
			require.Equal(t, false, shown["blocks_group"])

			st := e.stats(t)
			require.Equal(t, 1, *st.Groups)
			require.Positive(t, *st.AgeMs, "the head has been dead a while")
			require.Less(t, *st.AgeMs, int64(60_000))
			table = e.ok(t, "stats", "--blocked")
			require.Regexp(t, `blocked ordered groups\s+1\n`, table)

			out := tt.release(t, e, keys[0])
			require.Contains(t, out, " 1, skipped 0")
			require.Equal(t, 0, *e.stats(t).Groups, "a released group is no longer blocked")

			s = e.sweep(t)
			require.Equal(t, len(tt.delivered), s.Delivered)
			require.Zero(t, s.BlockedGroups)
			var want []string
			for _, i := range tt.delivered {
				want = append(want, keys[i])
			}
			require.Equal(t, want, receivedKeys(t, e.events, len(want)), "the group goes on, in staging order")
			st = e.stats(t)
			require.Zero(t, *st.Groups)
			require.Zero(t, *st.AgeMs)
			dead = e.deadList(t)
			require.NotContains(t, dead, keys[0])
			require.Contains(t, dead, "ghost-0000")
		})
	}
}

func TestOperator_ADeadHeadUnderSkipBlocksNothing(t *testing.T) {
	t.Parallel()
	e := newOrderedEnv(t, "events.fifo=skip")
	keys := e.stageGroup(t, "g")

	s := e.sweep(t)
	require.Equal(t, 1, s.DeadLettered)
	require.Equal(t, 2, s.Delivered, "the group moves on without its head")
	require.Equal(t, keys, receivedKeys(t, e.events, 3), "behind the message closing the head's place")

	dead := e.deadList(t)
	require.Len(t, dead, 1)
	require.Equal(t, "g", dead[keys[0]].Group)
	require.Equal(t, int64(1), dead[keys[0]].Seq)
	require.False(t, *dead[keys[0]].BlocksGroup)
	require.NotContains(t, e.ok(t, "dead", "show", keys[0]), "blocks group")
	st := e.stats(t)
	require.Zero(t, *st.Groups)
	require.Zero(t, *st.AgeMs)
}

// TestOperator_TheOrderedFlagWinsOverTheEnvironment: the operator commands
// read the dead-head policies from --ordered if given, else from
// OUTFLOW_ORDERED, and refuse a value the dispatcher would refuse.
func TestOperator_TheOrderedFlagWinsOverTheEnvironment(t *testing.T) {
	t.Parallel()
	e := newOrderedEnv(t, "events.fifo=skip")
	keys := e.stageGroup(t, "g")
	e.sweep(t)

	for _, tt := range []struct {
		env, flag string
		blocks    bool
	}{
		{"events.fifo=skip", "", false},
		{"events.fifo=skip", "events.fifo", true},
		{"events.fifo", "events.fifo=skip", false},
		{"events.fifo=block", "", true},
		// A route the dispatcher was not told is ordered is held to block.
		{"none", "", true},
		{"", "", true},
		{"", "other.fifo=skip", true},
	} {
		e.vars["OUTFLOW_ORDERED"] = tt.env
		var flag []string
		if tt.flag != "" {
			flag = []string{"--ordered", tt.flag}
		}
		what := fmt.Sprintf("OUTFLOW_ORDERED=%q --ordered=%q", tt.env, tt.flag)
		require.Equal(t, tt.blocks, *e.deadList(t, flag...)[keys[0]].BlocksGroup, what)
		var shown struct {
			BlocksGroup bool `json:"blocks_group"`
		}
		require.NoError(t, json.Unmarshal([]byte(e.ok(t, append([]string{"dead", "show", keys[0], "--output", "json"}, flag...)...)), &shown))
		require.Equal(t, tt.blocks, shown.BlocksGroup, what)
		groups := 0
		if tt.blocks {
			groups = 1
		}
		require.Equal(t, groups, *e.stats(t, flag...).Groups, what)
	}

	for _, args := range [][]string{
		{"dead", "list", "--ordered", "events=skip"},
		{"dead", "show", keys[0], "--ordered", "events.fifo=stop"},
		{"stats", "--ordered", "events.fifo,events.fifo"},
	} {
		r := e.run(t, args...)
		require.Equal(t, cli.ExitUsage, r.code, "%v: %s", args, r.stderr)
		require.Contains(t, r.stderr, "--ordered=", args)
	}
	e.vars["OUTFLOW_ORDERED"] = "orders"
	r := e.run(t, "stats")
	require.Equal(t, cli.ExitUsage, r.code)
	require.Contains(t, r.stderr, `OUTFLOW_ORDERED="orders"`)
}
