package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/consume"
	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/faults"
	"github.com/outflowhq/outflow/internal/subscriber"
)

// newTopic creates a FIFO topic on the soak's SNS server, deleted after
// the test, and returns its ARN.
func newTopic(t *testing.T, api *sns.Client) string {
	t.Helper()
	out, err := api.CreateTopic(context.Background(), &sns.CreateTopicInput{
		Name: aws.String(awstest.UniqueName("outflow-e2e") + ".fifo"), Attributes: map[string]string{"FifoTopic": "true"},
	})
	require.NoError(t, err)
	arn := aws.ToString(out.TopicArn)
	t.Cleanup(func() { _, _ = api.DeleteTopic(context.Background(), &sns.DeleteTopicInput{TopicArn: aws.String(arn)}) })
	return arn
}

// subscribe makes a FIFO queue on the soak's SQS server, subscribes it to
// the topic with raw message delivery, and returns its URL.
func subscribe(t *testing.T, snsAPI *sns.Client, sqsAPI *sqs.Client, topic string) string {
	t.Helper()
	ctx := context.Background()
	url := awstest.NewQueueOn(t, sqsAPI, true)
	arn, err := subscriber.QueueARN(ctx, sqsAPI, url)
	require.NoError(t, err)
	require.NoError(t, subscriber.Topic(ctx, snsAPI, topic, arn))
	return url
}

// drained reports whether the queue holds no message, visible or not.
// It asks for All: the patched moto server leaves the counts out of a
// queue's attribute names while another request sends to or receives
// from it, and a request naming a count then fails as naming an unknown
// attribute.
func drained(ctx context.Context, api *sqs.Client, url string) (bool, error) {
	out, err := api.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll}})
	if err != nil {
		return false, err
	}
	for _, name := range []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages,
		sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible, sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed} {
		if v, ok := out.Attributes[string(name)]; !ok || v != "0" {
			return false, nil
		}
	}
	return true, nil
}

// joiner is the second subscriber of the route that skips: a queue
// subscribed to its topic part-way through the soak, so it starts on most
// groups after they began, consumed by an Inbox that joins each group
// where it first sees it (JoinWhereSeen; GapWait and LateRecord, the
// defaults) through Inbox.Apply and Inbox.Close. Its effect appends each
// row to its own log of the group. It is killed as the ledger's
// consumer is. A gap it passes only when every place in it was given up
// by the operator (a second purge deleted the dead letter, whose place no
// message will ever close): under GapWait no other gap may stay open.
type joiner struct {
	db    *dynamodb.Client
	table string
	in    *consume.Inbox
	plan  *faults.Plan
	want  map[string]transfer
	// givenUp reports whether every place from..to of the group was
	// given up by the operator.
	givenUp func(group string, from, to int64) bool

	applies, committed, duplicates, waits, killedBefore, killedAfter atomic.Int64

	mu       sync.Mutex
	attempts map[string]int
	// seen holds the groups any message of which the joiner received.
	seen map[string]bool
	// closed holds the places closed by Outflow's message, by group;
	// late the keys recorded late (rows), lateClosed the closing
	// messages recorded late, redrivenApplied the keys applied that came
	// with the redriven mark.
	closed          map[string][]int64
	late            map[string]bool
	lateClosed      map[string]bool
	redrivenApplied map[string]bool
	passed          []gap
	problems        []string
	// events holds, by group, what became of each message received, in
	// the order the outcomes came: a failure's diagnosis.
	events map[string][]string
	start  time.Time
}

func newJoiner(db *dynamodb.Client, table string, in *consume.Inbox, plan *faults.Plan, want map[string]transfer, start time.Time, givenUp func(string, int64, int64) bool) *joiner {
	return &joiner{db: db, table: table, in: in, plan: plan, want: want, givenUp: givenUp, attempts: map[string]int{}, seen: map[string]bool{},
		closed: map[string][]int64{}, late: map[string]bool{}, lateClosed: map[string]bool{}, redrivenApplied: map[string]bool{},
		events: map[string][]string{}, start: start}
}

// note records what became of a message.
func (j *joiner) note(m consume.Message, err error) {
	what := "applied"
	if err != nil {
		what = err.Error()
	}
	j.mu.Lock()
	j.events[m.Group] = append(j.events[m.Group], fmt.Sprintf("%s place %d closed %q redriven %v (message %s): %s at %s",
		m.Key, m.Seq, m.Closed, m.Redriven, m.MessageID, what, time.Since(j.start).Round(time.Millisecond)))
	j.mu.Unlock()
}

func (j *joiner) problem(format string, args ...any) {
	j.mu.Lock()
	j.problems = append(j.problems, fmt.Sprintf(format, args...))
	j.mu.Unlock()
}

// effect appends the row's key to the joiner's log of its group.
func (j *joiner) effect(m consume.Message) []types.TransactWriteItem {
	return []types.TransactWriteItem{{Update: &types.Update{
		TableName:                aws.String(j.table),
		Key:                      pk("joinlog " + m.Group),
		UpdateExpression:         aws.String("SET #log = list_append(if_not_exists(#log, :empty), :k)"),
		ExpressionAttributeNames: map[string]string{"#log": "log"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":empty": &types.AttributeValueMemberL{},
			":k":     &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{Value: m.Key}}},
		},
	}}}
}

// check compares a message with what was staged.
func (j *joiner) check(m consume.Message) error {
	tr, ok := j.want[m.Key]
	var p payload
	switch {
	case !ok:
		j.problem("joiner received %s, which was never staged", m.Key)
		return fmt.Errorf("unknown key %s", m.Key)
	case m.Seq != tr.place || m.Group != tr.group || tr.route != routeOrdered:
		j.problem("joiner received %s as place %d of group %q, staged as %d of %q on %s", m.Key, m.Seq, m.Group, tr.place, tr.group, tr.route)
		return fmt.Errorf("%s: place differs", m.Key)
	case m.Closed == "" && (json.Unmarshal(m.Payload, &p) != nil || p.Account != tr.account || p.Amount != tr.amount):
		j.problem("joiner received %s as %q, staged as %s %d", m.Key, m.Payload, tr.account, tr.amount)
		return fmt.Errorf("%s: payload differs", m.Key)
	}
	return nil
}

// pass applies a message past a gap the operator gave up, as the
// operator who deleted those places would tell a GapWait consumer to.
func (j *joiner) pass(ctx context.Context, m consume.Message, order *consume.OrderError, effect []types.TransactWriteItem) error {
	items, err := j.in.TransactItemsPast(m, order)
	if err != nil {
		return err
	}
	tx := append(slices.Clone(effect), items...)
	_, err = j.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: tx})
	if err = j.in.Classify(ctx, m, tx, err); err == nil {
		j.mu.Lock()
		j.passed = append(j.passed, gap{group: m.Group, from: order.Cursor + 1, to: order.Place - 1})
		j.mu.Unlock()
	}
	return err
}

// apply is the joiner's Apply for one process.
func (j *joiner) apply(ctx context.Context, proc *process, m consume.Message) error {
	if proc.dead.Load() {
		return errKilled
	}
	j.applies.Add(1)
	j.mu.Lock()
	j.attempts[m.Key]++
	n := j.attempts[m.Key]
	j.seen[m.Group] = true
	j.mu.Unlock()
	if j.plan.Hit(killBeforeEffect, "joiner", m.Key, n) {
		j.killedBefore.Add(1)
		proc.kill()
		return errKilled
	}
	if err := j.check(m); err != nil {
		return err
	}
	effect := j.effect(m)
	err := j.in.Apply(ctx, m, effect...)
	var order *consume.OrderError
	if errors.As(err, &order) && order.Gap() && j.givenUp(m.Group, order.Cursor+1, order.Place-1) {
		err = j.pass(ctx, m, order, effect)
	}
	j.note(m, err)
	switch {
	case err == nil:
		j.committed.Add(1)
		if m.Redriven {
			j.mu.Lock()
			j.redrivenApplied[m.Key] = true
			j.mu.Unlock()
		}
	case errors.Is(err, consume.ErrLate):
		j.mu.Lock()
		j.late[m.Key] = true
		j.mu.Unlock()
		return err
	case errors.Is(err, consume.ErrDuplicate):
		j.duplicates.Add(1)
		return err
	case errors.Is(err, consume.ErrGap):
		j.waits.Add(1)
		return err
	default:
		return err
	}
	if j.plan.Hit(killAfterEffect, "joiner", m.Key, n) {
		j.killedAfter.Add(1)
		proc.kill()
	}
	return nil
}

// close is the joiner's Closed for one process: Inbox.Close.
func (j *joiner) close(ctx context.Context, proc *process, m consume.Message) error {
	if proc.dead.Load() {
		return errKilled
	}
	j.applies.Add(1)
	j.mu.Lock()
	j.seen[m.Group] = true
	j.mu.Unlock()
	if err := j.check(m); err != nil {
		return err
	}
	err := j.in.Close(ctx, m)
	var order *consume.OrderError
	if errors.As(err, &order) && order.Gap() && j.givenUp(m.Group, order.Cursor+1, order.Place-1) {
		err = j.pass(ctx, m, order, nil)
	}
	j.note(m, err)
	switch {
	case err == nil:
		j.mu.Lock()
		j.closed[m.Group] = append(j.closed[m.Group], m.Seq)
		j.mu.Unlock()
	case errors.Is(err, consume.ErrLate):
		j.mu.Lock()
		j.lateClosed[m.Key] = true
		j.mu.Unlock()
	case errors.Is(err, consume.ErrDuplicate):
		j.duplicates.Add(1)
	case errors.Is(err, consume.ErrGap):
		j.waits.Add(1)
	}
	return err
}

// progress counts what the joiner has done, for the soak's wait.
func (j *joiner) progress() int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	n := j.committed.Load() + int64(len(j.late)+len(j.lateClosed))
	for _, places := range j.closed {
		n += int64(len(places))
	}
	return n
}

// joinCursor is a group's cursor at the joiner, as its Inbox left it.
type joinCursor struct {
	seq, joined, skipped int64
	joining              bool
}

// trial notes a redriven row that started group g on trial.
func (o *joinOutcome) trial(g, what string, c joinCursor) {
	if len(o.trials) >= 4 {
		return
	}
	if c.joining {
		what += ", on trial still"
	} else {
		what += fmt.Sprintf(", joined at %d, now at %d", c.joined, c.seq)
	}
	o.trials = append(o.trials, what)
}

// joinCursors reads the joiner's group cursors.
func joinCursors(t *testing.T, db *dynamodb.Client, table, consumer string) map[string]joinCursor {
	t.Helper()
	cursors := map[string]joinCursor{}
	for _, it := range scan(t, db, table, "cursor "+consumer+" ") {
		group := it["group"].(*types.AttributeValueMemberS).Value
		c := joinCursor{seq: num(t, it["seq"])}
		if v, ok := it["joined"]; ok {
			c.joined = num(t, v)
		}
		if v, ok := it["skipped"]; ok {
			c.skipped = num(t, v)
		}
		if v, ok := it["joining"].(*types.AttributeValueMemberBOOL); ok {
			c.joining = v.Value
		}
		cursors[group] = c
	}
	return cursors
}

// joinOutcome is what the joiner checks found, for the report.
type joinOutcome struct {
	groups, partWay, fromStart, onTrial, trialJoins, skipped int
	// trials names, for the first few groups a redriven row started on
	// trial, where and how it went on.
	trials []string
}

// checkJoiner holds the joiner to its promise, group by group: from the
// place it joined at (its cursor's joined; 1 if it started at place 1)
// through the place its cursor reached, every place was applied or
// closed exactly once, in order, or passed only where the operator gave
// it up; a group it received any message of that was sent in its turn
// ended where the ledger's consumer ended it (the group's end), its
// trial over; a group it received only redriven rows of is still on
// trial (joining), at the last of them, and applied nothing else; it
// applied only rows the ledger's consumer applied in their turn, or
// redriven rows it started a group at on trial (or the next place after
// one); it recorded late only redriven rows and their closing messages. end is each group's last place applied or
// closed by the ledger's consumer; dead the keys of rows that ended dead
// letters or purged.
func checkJoiner(t *testing.T, j *joiner, db *dynamodb.Client, table, consumer string, groups map[string][]string, byKey map[string]transfer,
	end map[string]int64, appliedMain, dead, redriven map[string]bool) joinOutcome {
	t.Helper()
	j.mu.Lock()
	defer j.mu.Unlock()
	require.Empty(t, j.problems, "what the joiner received matches what was staged")
	cursors := joinCursors(t, db, table, consumer)
	var out joinOutcome
	for g := range j.seen {
		require.Contains(t, cursors, g, "group %s: the joiner received its messages and has no cursor for it", g)
	}
	passed := map[string]map[int64]bool{}
	for _, p := range j.passed {
		if passed[p.group] == nil {
			passed[p.group] = map[int64]bool{}
		}
		for place := p.from; place <= p.to; place++ {
			passed[p.group][place] = true
		}
	}
	for _, g := range slices.Sorted(maps.Keys(cursors)) {
		c := cursors[g]
		out.groups++
		out.skipped += int(c.skipped)
		keys := groups[g]
		require.NotEmpty(t, keys, "the joiner has a cursor for %s, which no transfer was staged in", g)
		var log []string
		if it := getItem(t, db, table, "joinlog "+g); it != nil {
			for _, v := range it["log"].(*types.AttributeValueMemberL).Value {
				log = append(log, v.(*types.AttributeValueMemberS).Value)
			}
		}
		joined := max(c.joined, 1)
		at := map[int64]string{}
		var last int64
		for _, k := range log {
			tr := byKey[k]
			require.Equal(t, g, tr.group, "the joiner's log of %s holds %s, of group %s", g, k, tr.group)
			require.Greater(t, tr.place, last, "group %s: the joiner applied %s (place %d) after place %d: out of order, or twice (log %v)", g, k, tr.place, last, log)
			last = tr.place
			at[tr.place] = k
			if tr.place < joined || c.joining {
				require.True(t, redriven[k] && j.redrivenApplied[k], "group %s: the joiner applied %s (place %d) before the place it joined at (%d): only a redriven row it started the group at on trial may be", g, k, tr.place, joined)
				out.trialJoins++
				out.trial(g, fmt.Sprintf("%s applied at %d", g, tr.place), c)
				continue
			}
			// In its turn here: applied by the ledger's consumer too, or a
			// redriven row that came late there and came next here (on
			// trial after another at the place before it).
			require.True(t, appliedMain[k] || (redriven[k] && j.redrivenApplied[k]), "group %s: the joiner applied %s (place %d), which the ledger's consumer never applied", g, k, tr.place)
		}
		closed := map[int64]bool{}
		for _, p := range j.closed[g] {
			require.False(t, closed[p], "group %s: the joiner closed place %d twice", g, p)
			closed[p] = true
			require.True(t, p <= c.seq && p <= int64(len(keys)), "group %s: place %d closed, past the cursor (%d) or the group's last", g, p, c.seq)
			k := keys[p-1]
			require.True(t, dead[k] || redriven[k], "group %s: the joiner closed place %d (%s), which is no dead letter", g, p, k)
			require.Empty(t, at[p], "group %s: place %d applied (%s) and closed", g, p, at[p])
			last = max(last, p)
			if p < joined || c.joining {
				// A redriven row's place closed again (it failed again)
				// started the group on trial.
				require.True(t, redriven[k], "group %s: the joiner closed place %d (%s) before the place it joined at (%d): only a redriven row's it started the group at on trial may be", g, p, k, joined)
				out.trialJoins++
				out.trial(g, fmt.Sprintf("%s closed at %d", g, p), c)
			}
		}
		if c.joining {
			// Only redriven rows reached it: the group is still on trial,
			// at the last of them, which no message sent in its turn ended.
			out.onTrial++
			require.Equal(t, last, c.seq, "group %s: on trial at place %d, its last redriven row at %d", g, c.seq, last)
			continue
		}
		if joined > 1 {
			out.partWay++
		} else {
			out.fromStart++
		}
		for p := joined; p <= c.seq; p++ {
			n := 0
			if at[p] != "" {
				n++
			}
			if closed[p] {
				n++
			}
			if passed[g][p] {
				n++
			}
			require.Equal(t, 1, n, "group %s: place %d (%s) applied, closed or passed (given up) %d times from the place the joiner joined at, %d, to its cursor, %d (log %v, closed %v)",
				g, p, keys[p-1], n, joined, c.seq, log, slices.Sorted(maps.Keys(closed)))
		}
		require.Equal(t, end[g], c.seq, "group %s: the joiner's cursor is at %d (joined at %d), the group's end is %d: a place it waits at for ever, or one it went past", g, c.seq, joined, end[g])
	}
	for k := range j.late {
		require.True(t, redriven[k], "the joiner recorded %s late, but only a redriven row may come late", k)
	}
	for k := range j.lateClosed {
		require.True(t, redriven[k], "the joiner recorded the closing message of %s late, but only a redriven row's place is closed again", k)
	}
	return out
}

// joinerItems lists the joiner's inbox items of a group, for a
// diagnosis.
func joinerItems(t *testing.T, db *dynamodb.Client, table, consumer, group string) string {
	t.Helper()
	var lines []string
	for _, it := range scan(t, db, table, "inbox "+consumer+" ") {
		if g, ok := it["group"].(*types.AttributeValueMemberS); !ok || g.Value != group {
			continue
		}
		line := it["pk"].(*types.AttributeValueMemberS).Value
		for _, a := range []string{"seq", "gap_from", "gap_to", "late_after"} {
			if v, ok := it[a].(*types.AttributeValueMemberN); ok {
				line += " " + a + "=" + v.Value
			}
		}
		lines = append(lines, line)
	}
	slices.SortFunc(lines, func(a, b string) int { return len(a) - len(b) })
	return fmt.Sprint(lines) + " (" + strconv.Itoa(len(lines)) + " items)"
}

// joinClosed counts the places the joiner closed.
func joinClosed(j *joiner) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	n := 0
	for _, places := range j.closed {
		n += len(places)
	}
	return n
}

// joinerStuck tells, for each group whose joiner cursor is not at the
// group's end, where it is, what the joiner recorded of the group, the
// rows as Outflow left them and their sends as they reached SNS.
func joinerStuck(ctx context.Context, t *testing.T, j *joiner, db *dynamodb.Client, table, consumer string, end map[string]int64,
	store *dynamo.Store, wire *wireLog, groups map[string][]string, start time.Time) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("the joiner's queue is not drained; its groups not at their end:\n")
	cursors := joinCursors(t, db, table, consumer)
	for _, g := range slices.Sorted(maps.Keys(cursors)) {
		c := cursors[g]
		if c.seq == end[g] {
			continue
		}
		fmt.Fprintf(&b, "  %s: cursor %+v, end %d; %s\n", g, c, end[g], joinerItems(t, db, table, consumer, g))
		keys := groups[g][max(0, c.seq-2):min(int64(len(groups[g])), c.seq+2)]
		for _, k := range keys {
			row, err := store.Get(ctx, k)
			switch {
			case err != nil:
				fmt.Fprintf(&b, "    %s: %v\n", k, err)
			case row == nil:
				fmt.Fprintf(&b, "    %s: gone\n", k)
			default:
				redriven := "never redriven"
				if !row.RedrivenAt.IsZero() {
					redriven = "redriven at clock +" + row.RedrivenAt.Sub(start).Round(time.Millisecond).String()
				}
				fmt.Fprintf(&b, "    %s (place %d): %s, closed %q, attempt %d, %s, unsure_at set %v, errors %+v\n", k, row.Seq, row.Status, row.Closed, row.Attempt,
					redriven, !row.UnsureAt.IsZero(), row.Errors)
			}
		}
		b.WriteString("    sends, in the order their calls started:\n")
		b.WriteString(wire.report(groups[g][max(0, c.seq-2):min(int64(len(groups[g])), c.seq+12)], start))
		j.mu.Lock()
		events := slices.Clone(j.events[g])
		j.mu.Unlock()
		b.WriteString("    what the joiner made of each message of the group, in order (wall clock from the soak's start):\n")
		for _, e := range events {
			b.WriteString("      " + e + "\n")
		}
	}
	return b.String()
}
