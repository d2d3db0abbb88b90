package interop_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"
)

// drainInput is what drained reads.
type drainInput struct {
	outbox, ledger, inbox, queueURL string
	purged, redriven                map[string]bool
}

// drainState is how far the run has come: effects in the ledger, places
// of refused rows closed in the inbox, redriven rows recorded late,
// rows the dispatcher has not settled, and the queue's messages.
type drainState struct {
	applied, closed, late, unsettled int
	visible, inFlight, delayed       int
}

func (s drainState) String() string {
	return fmt.Sprintf("%d applied, %d places of dead letters closed, %d recorded late, %d rows unsettled; in the queue %d visible, %d in flight, %d delayed",
		s.applied, s.closed, s.late, s.unsettled, s.visible, s.inFlight, s.delayed)
}

// done reports whether every dead letter's place is closed, every
// redriven one recorded late, every row settled and the queue empty.
func (s drainState) done(purged, redriven int) bool {
	return s.closed == purged+redriven && s.late == redriven && s.unsettled == 0 && s.visible == 0 && s.inFlight == 0 && s.delayed == 0
}

// drained reads the tables and the queue.
func drained(ctx context.Context, t *testing.T, db *dynamodb.Client, sqsClient *sqs.Client, in drainInput) drainState {
	t.Helper()
	var s drainState
	for _, it := range scanAll(ctx, t, db, in.ledger) {
		if strings.HasPrefix(str(it["pk"]), "applied ") {
			s.applied++
		}
	}
	inbox := byPK(scanAll(ctx, t, db, in.inbox))
	for k := range in.purged {
		if inbox[closingPK(k)] != nil {
			s.closed++
		}
	}
	for k := range in.redriven {
		if inbox[closingPK(k)] != nil {
			s.closed++
		}
		if rec := inbox[rowPK(k)]; rec != nil && boolean(rec["applied"]) == "false" {
			s.late++
		}
	}
	for _, it := range scanAll(ctx, t, db, in.outbox) {
		if st, ok := it["status"]; ok && str(st) != "done" {
			s.unsettled++
		}
	}
	s.visible, s.inFlight, s.delayed = queueDepth(ctx, t, sqsClient, in.queueURL)
	return s
}

// queueDepth is the queue's messages visible, in flight (received, not
// deleted) and delayed.
func queueDepth(ctx context.Context, t *testing.T, sqsClient *sqs.Client, url string) (visible, inFlight, delayed int) {
	t.Helper()
	out, err := sqsClient.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{
		sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
		sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed,
	}})
	require.NoError(t, err, "the queue's attributes")
	n := func(name sqstypes.QueueAttributeName) int {
		v, ok := out.Attributes[string(name)]
		require.True(t, ok, "the queue's %s", name)
		i, err := strconv.Atoi(v)
		require.NoError(t, err, "the queue's %s", name)
		return i
	}
	return n(sqstypes.QueueAttributeNameApproximateNumberOfMessages), n(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible),
		n(sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed)
}

// rowPK is the inbox item of a row the consumer applied (or recorded
// late); closingPK that of the message closing the row's place.
func rowPK(key string) string     { return "inbox " + consumerName + " " + key }
func closingPK(key string) string { return rowPK(key) + " closed" }

// checkInput is what check compares: the tables and the queue, and what
// the processes said and the operator did.
type checkInput struct {
	outbox, ledger, inbox, shop, queueURL string
	groups                                []string
	staged                                map[string][]stagedRow
	said                                  map[string][]said
	purged, redriven                      map[string]bool
}

// ledgerRow is a ledger item: the consumer's record of one row applied.
type ledgerRow struct {
	key, group, by string
	seq, applies   int64
}

// place is what filled a place of a group: a row applied, or the
// message closing a dead letter's place.
type place struct {
	key    string
	seq    int64
	closed string // the closing message's reason; "" for a row applied
}

// check compares the tables with what was staged: see the test's doc.
func check(ctx context.Context, t *testing.T, db *dynamodb.Client, sqsClient *sqs.Client, in checkInput) {
	t.Helper()
	// What was staged: each producer staged into every group, in its own
	// order.
	byKey := map[string]stagedRow{}
	perGroup := map[string]int{}
	for lang, rows := range in.staged {
		require.Len(t, rows, groupCount*rowsPerGroup, "the %s producer's rows", lang)
		groupsOf := map[string]int{}
		for _, s := range rows {
			require.True(t, strings.HasPrefix(s.Key, prefixes[lang]), "the %s producer staged %s", lang, s.Key)
			require.NotContains(t, byKey, s.Key, "%s staged twice", s.Key)
			byKey[s.Key] = s
			groupsOf[s.Group]++
			perGroup[s.Group]++
		}
		for _, g := range in.groups {
			require.Equal(t, rowsPerGroup, groupsOf[g], "the %s producer's rows in group %s", lang, g)
		}
	}
	dead := map[string]bool{}
	for k := range in.purged {
		dead[k] = true
	}
	for k := range in.redriven {
		require.False(t, dead[k], "%s both purged and redriven", k)
		dead[k] = true
	}
	for k := range dead {
		require.Contains(t, byKey, k, "the operator acted on %s, which no producer staged", k)
	}

	// The ledger: one item per key staged and not dead, applied once, by
	// one of the consumers, at the place the consumer said.
	led := map[string]ledgerRow{}
	logs := map[string][]string{}
	for _, it := range scanAll(ctx, t, db, in.ledger) {
		pk := str(it["pk"])
		switch {
		case strings.HasPrefix(pk, "applied "):
			lr := ledgerRow{key: str(it["key"]), group: str(it["group"]), by: str(it["consumer"]), seq: num(t, it["seq"]), applies: num(t, it["applies"])}
			require.Equal(t, "applied "+lr.key, pk)
			led[lr.key] = lr
		case strings.HasPrefix(pk, "log "):
			l, ok := it["log"].(*types.AttributeValueMemberL)
			require.True(t, ok, "%s: a list", pk)
			for _, v := range l.Value {
				logs[strings.TrimPrefix(pk, "log ")] = append(logs[strings.TrimPrefix(pk, "log ")], str(v))
			}
		default:
			t.Fatalf("an item the consumers did not write: %s", pk)
		}
	}
	var missing, unknown, twice, applyDead, unsaid []string
	for key := range byKey {
		if _, ok := led[key]; !ok && !dead[key] {
			missing = append(missing, key)
		}
	}
	appliedBy := map[string]int{}
	for key, lr := range led {
		if _, ok := byKey[key]; !ok {
			unknown = append(unknown, key)
		}
		if dead[key] {
			applyDead = append(applyDead, key)
		}
		if lr.applies != 1 {
			twice = append(twice, fmt.Sprintf("%s %d times", key, lr.applies))
		}
		if at, ok := appliedSaid(in.said[key]); ok {
			require.Equal(t, said{by: lr.by, outcome: "applied", group: lr.group, seq: lr.seq}, at, "%s: the ledger and what its consumer said", key)
		} else {
			// The effect committed, and its consumer was killed before it
			// said so (or told otherwise: a lost answer, the inbox refusing
			// the client's second try as a duplicate). Once, still.
			unsaid = append(unsaid, key)
		}
		appliedBy[lr.by]++
	}
	slices.Sort(missing)
	slices.Sort(unknown)
	slices.Sort(twice)
	slices.Sort(applyDead)
	slices.Sort(unsaid)
	if len(unsaid) > 0 {
		t.Logf("applied once, and not said applied by the consumer that applied it (killed before it said so, or an answer lost): %v", unsaid)
	}
	require.Empty(t, missing, "rows staged and never applied")
	require.Empty(t, unknown, "rows applied and never staged")
	require.Empty(t, twice, "rows applied more than once")
	require.Empty(t, applyDead, "dead letters applied (purged, or redriven after their place was closed)")
	require.Len(t, led, len(byKey)-len(dead))
	t.Logf("applied by consumer: %v", appliedBy)
	for _, lang := range langs {
		require.Positive(t, appliedBy[lang], "the %s consumer applied rows", lang)
	}

	// What the consumers said of each key: a row that is no dead letter
	// was never late; a dead letter's row (closed "") was never applied;
	// a redriven one's copies were all marked redriven, and it was
	// acknowledged: late, or a duplicate of its late record (its late
	// consumer killed before it said so).
	// A closing message is closed once and a late row recorded late once:
	// a copy of either is a duplicate.
	for key, ss := range in.said {
		require.Contains(t, byKey, key, "a consumer reported a key no producer staged: %v", ss)
		acked, closings, lates := false, 0, 0
		for _, s := range ss {
			if s.closed != "" {
				require.True(t, dead[key], "%s: a message closing its place (%s), and it is no dead letter", key, s.closed)
				require.Contains(t, []string{"closed", "duplicate", "skipped"}, s.outcome, "%s: its closing message %s by the %s consumer: %s", key, s.outcome, s.by, s.err)
				if s.outcome == "closed" {
					closings++
				}
				require.LessOrEqual(t, closings, 1, "%s: its place closed twice: %v", key, ss)
				continue
			}
			switch {
			case in.redriven[key]:
				require.True(t, s.redriven, "%s: a copy of the redriven row without outflow.redriven (%s by the %s consumer)", key, s.outcome, s.by)
				require.NotEqual(t, "applied", s.outcome, "%s: the redriven row applied", key)
				acked = acked || s.outcome == "late" || s.outcome == "duplicate"
				if s.outcome == "late" {
					lates++
				}
				require.LessOrEqual(t, lates, 1, "%s: recorded late twice, a copy not taken for a duplicate: %v", key, ss)
			case in.purged[key]:
				t.Fatalf("%s: the purged row reached a consumer: %s by the %s consumer", key, s.outcome, s.by)
			default:
				require.NotEqual(t, "late", s.outcome, "%s: late, and no dead letter: %s", key, s.err)
				require.False(t, s.redriven, "%s: marked redriven, and never redriven", key)
			}
		}
		if in.redriven[key] {
			require.True(t, acked, "%s: the redriven row was never acknowledged (late, or a duplicate): %v", key, ss)
		}
	}

	// Each group: places 1..n, each applied (a ledger item at the place
	// the dispatcher's table gave its row, recorded by the inbox at that
	// place) or closed (the inbox's record of the message closing a dead
	// letter's place) exactly once; applied in that order (its log); and
	// each producer's rows, closed places included, in the order it
	// committed them.
	outboxRows := byPK(scanAll(ctx, t, db, in.outbox))
	inboxItems := byPK(scanAll(ctx, t, db, in.inbox))
	closedAt := map[string]place{}
	for k := range dead {
		rec := inboxItems[closingPK(k)]
		require.NotNil(t, rec, "%s: the record of the message closing its place", k)
		require.Equal(t, byKey[k].Group, str(rec["group"]), "%s: its place's group", k)
		closedAt[k] = place{key: k, seq: num(t, rec["seq"]), closed: str(rec["closed"])}
		require.NotEmpty(t, closedAt[k].closed, "%s: closed by what", k)
	}
	for _, g := range in.groups {
		var places []place
		var applied []string
		for _, lr := range led {
			if lr.group == g {
				places = append(places, place{key: lr.key, seq: lr.seq})
			}
		}
		for k, p := range closedAt {
			if byKey[k].Group == g {
				places = append(places, p)
			}
		}
		sort.Slice(places, func(i, j int) bool { return places[i].seq < places[j].seq })
		require.Len(t, places, perGroup[g], "group %s: places applied or closed", g)
		keys := make([]string, len(places))
		var desc []string
		for i, p := range places {
			require.Equal(t, int64(i+1), p.seq, "group %s: place %d holds %s at place %d: a gap, or a place twice", g, i+1, p.key, p.seq)
			require.Equal(t, byKey[p.key].Group, g, "%s: in group %s", p.key, g)
			keys[i] = p.key
			row := outboxRows[p.key]
			if p.closed != "" {
				desc = append(desc, p.key+"("+p.closed+")")
				if row != nil { // redriven: settled done; purged: deleted, or kept as done if its purge sent a closing message
					require.Equal(t, p.seq, num(t, row["seq"]), "%s: its place closed at %d, staged at %d", p.key, p.seq, num(t, row["seq"]))
				}
				continue
			}
			desc = append(desc, p.key)
			applied = append(applied, p.key)
			require.NotNil(t, row, "%s: its row in the dispatcher's table", p.key)
			require.Equal(t, g, str(row["group"]), "%s: its row's group", p.key)
			require.Equal(t, p.seq, num(t, row["seq"]), "%s: applied at place %d, staged at place %d", p.key, p.seq, num(t, row["seq"]))
			require.Equal(t, "done", str(row["status"]), "%s: its row is settled as delivered", p.key)
			rec := inboxItems[rowPK(p.key)]
			require.NotNil(t, rec, "%s: its inbox item", p.key)
			require.Equal(t, p.seq, num(t, rec["seq"]), "%s: its inbox item's place", p.key)
			require.NotEqual(t, "false", boolean(rec["applied"]), "%s: its inbox item says applied", p.key)
		}
		require.Equal(t, applied, logs[g], "group %s: applied in place order", g)
		cursor := inboxItems["cursor "+consumerName+" "+g]
		require.NotNil(t, cursor, "group %s: the consumer's cursor", g)
		require.Equal(t, int64(len(keys)), num(t, cursor["seq"]), "group %s: the consumer's cursor is at its last place", g)
		for lang, rows := range in.staged {
			var mine, theirs []string
			for _, s := range rows {
				if s.Group == g {
					mine = append(mine, s.Key)
				}
			}
			for _, k := range keys {
				if strings.HasPrefix(k, prefixes[lang]) {
					theirs = append(theirs, k)
				}
			}
			require.Equal(t, mine, theirs, "group %s: the %s producer's rows in place order are not in its commit order", g, lang)
		}
		t.Logf("group %s, in place order: %s", g, strings.Join(desc, " "))
	}

	// The dead letters. A purged one: never applied (above), its place
	// closed, its row gone (or, had its closing message failed, kept as
	// done once its purge sent it), no inbox item of its own. A redriven
	// one, as docs/consuming.md's "Late rows" says of LateRecord: its
	// place closed before it came, it applied nothing (above), its inbox
	// item records it late (late_after, the place its group had reached,
	// at or past its own; applied = false), and the dispatcher settled it
	// done.
	for k := range in.purged {
		if row := outboxRows[k]; row != nil {
			require.Equal(t, "done", str(row["status"]), "%s: purged, its row kept: %v", k, row)
			require.Equal(t, "purged", str(row["closed"]), "%s: purged, its row kept: %v", k, row)
		}
		require.Nil(t, inboxItems[rowPK(k)], "%s: purged, and the inbox has an item of its row", k)
	}
	for k := range in.redriven {
		row := outboxRows[k]
		require.NotNil(t, row, "%s: its row", k)
		require.Equal(t, "done", str(row["status"]), "%s: redriven, and settled as delivered", k)
		rec := inboxItems[rowPK(k)]
		require.NotNil(t, rec, "%s: redriven after its place was closed, and not recorded late", k)
		require.Equal(t, "false", boolean(rec["applied"]), "%s: its late record says applied = false", k)
		require.NotNil(t, rec["late_after"], "%s: its late record has late_after", k)
		require.GreaterOrEqual(t, num(t, rec["late_after"]), closedAt[k].seq, "%s: late after the place its group had reached", k)
		require.Equal(t, closedAt[k].seq, num(t, rec["seq"]), "%s: its late record's place", k)
	}
	// The inbox: an item per row applied, per place closed and per row
	// recorded late, and a cursor per group.
	require.Len(t, inboxItems, len(led)+len(dead)+len(in.redriven)+groupCount,
		"the inbox table: an item per row applied, per place closed, per late row, a cursor per group: %v", slices.Sorted(maps.Keys(inboxItems)))

	// Each row committed with its producer's own write.
	shop := byPK(scanAll(ctx, t, db, in.shop))
	for key := range byKey {
		require.Contains(t, shop, key, "%s: its producer's own write", key)
	}
	require.Len(t, shop, len(byKey), "the producers' own writes")

	// Nothing left cycling: the queue is empty, the consumers stopped.
	visible, inFlight, delayed := queueDepth(ctx, t, sqsClient, in.queueURL)
	require.Zero(t, visible+inFlight+delayed, "the queue holds %d messages visible, %d in flight, %d delayed after the consumers drained it", visible, inFlight, delayed)
}

// appliedSaid is the applied outcome among a key's reports, if any.
func appliedSaid(ss []said) (said, bool) {
	for _, s := range ss {
		if s.outcome == "applied" && s.closed == "" {
			return said{by: s.by, outcome: s.outcome, group: s.group, seq: s.seq}, true
		}
	}
	return said{}, false
}

// boolean is a BOOL attribute as "true" or "false"; "" if it is none.
func boolean(v types.AttributeValue) string {
	if b, ok := v.(*types.AttributeValueMemberBOOL); ok {
		return strconv.FormatBool(b.Value)
	}
	return ""
}
