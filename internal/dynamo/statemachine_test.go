package dynamo_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

// modelRow is the state machine of docs/architecture.md, in memory.
type modelRow struct {
	exists     bool
	status     outbox.Status
	attempt    int
	token      string
	leaseUntil time.Time
	dueAt      time.Time
	createdAt  time.Time
	// seq and prev place a row staged in order in the test's group.
	seq  int64
	prev string
	// unsure: a claim took over a lapsed claim of the row, whose holder
	// may have sent it (unsure_at is set, and kept).
	unsure bool
}

// held is a claim some worker holds, perhaps long stale.
type held struct {
	key string
	row outbox.Row
}

var checkSeq atomic.Int64

// TestStateMachine_ConditionsMatchTheModel drives random interleavings of
// stage (in an ordered group or not), claim, done, retry, dead-letter,
// release, expire and redrive —
// settles using any claim ever taken, stale or not — against the store on
// the test endpoint, and checks every outcome against an in-memory model.
// Two live claims of one row, or a settle with a stale token, would show
// as a write the model refuses but the store applies. After each step it
// checks every row, the group's tail, and what the ordered head check reads
// of each row (its Link) and decides from it, under both dead-head
// policies.
func TestStateMachine_ConditionsMatchTheModel(t *testing.T) {
	t.Parallel()
	s := newStore(t, 0)
	const max = 3
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		check := checkSeq.Add(1)
		keys := []string{fmt.Sprintf("c%d-a", check), fmt.Sprintf("c%d-b", check)}
		keys = append(keys, fmt.Sprintf("c%d-c", check))
		model := map[string]*modelRow{keys[0]: {}, keys[1]: {}, keys[2]: {}}
		group := fmt.Sprintf("g%d", check)
		var tail dynamo.Tail // the model's group tail
		now := t0
		var claims []held

		expect := func(op string, want bool, err error) {
			var conflict *outbox.ConflictError
			switch {
			case err == nil && !want:
				rt.Fatalf("%s applied, but the model refuses it", op)
			case err != nil && want:
				rt.Fatalf("%s refused (%v), but the model applies it", op, err)
			case err != nil && !errors.As(err, &conflict):
				rt.Fatalf("%s failed outright: %v", op, err)
			}
		}
		current := func(h held) bool {
			m := model[h.key]
			return m.exists && m.status == outbox.StatusClaimed && m.token == h.row.Token
		}

		rt.Repeat(map[string]func(*rapid.T){
			"stage": func(rt *rapid.T) {
				k := rapid.SampledFrom(keys).Draw(rt, "key")
				m := model[k]
				if rapid.Bool().Draw(rt, "ordered") {
					err := s.StageOrdered(ctx, outbox.Row{Key: k, Queue: "q.fifo", Group: group, Payload: []byte("x")}, now)
					expect("stage ordered "+k, !m.exists, err)
					if !m.exists {
						*m = modelRow{exists: true, status: outbox.StatusPending, dueAt: now, createdAt: now, seq: tail.Seq + 1, prev: tail.Key}
						tail = dynamo.Tail{Key: k, Seq: tail.Seq + 1}
					}
					return
				}
				err := s.Stage(ctx, outbox.Row{Key: k, Queue: "q", Payload: []byte("x")}, now)
				// The same row staged again in the same millisecond is
				// indistinguishable from the SDK retrying a lost answer.
				again := m.exists && m.status == outbox.StatusPending && m.attempt == 0 && m.createdAt.Equal(now) && m.seq == 0
				expect("stage "+k, !m.exists || again, err)
				if !m.exists {
					*m = modelRow{exists: true, status: outbox.StatusPending, dueAt: now, createdAt: now}
				}
			},
			"claim": func(rt *rapid.T) {
				k := rapid.SampledFrom(keys).Draw(rt, "key")
				m := model[k]
				ok := m.exists && !m.dueAt.After(now) && m.attempt < max &&
					(m.status == outbox.StatusPending || m.status == outbox.StatusClaimed && m.leaseUntil.Before(now))
				row, err := s.Claim(ctx, k, now, lease, max)
				expect("claim "+k, ok, err)
				if ok {
					m.unsure = m.unsure || m.status == outbox.StatusClaimed
					m.status, m.attempt, m.token, m.leaseUntil = outbox.StatusClaimed, m.attempt+1, row.Token, now.Add(lease)
					claims = append(claims, held{key: k, row: row})
				}
			},
			"settle": func(rt *rapid.T) {
				if len(claims) == 0 {
					rt.Skip("no claim taken yet")
				}
				h := rapid.SampledFrom(claims).Draw(rt, "claim")
				op := rapid.SampledFrom([]string{"done", "retry", "dead-letter", "release"}).Draw(rt, "op")
				ok := current(h)
				m := model[h.key]
				hist := []outbox.AttemptError{{At: now, Attempt: h.row.Attempt, Message: op}}
				var err error
				switch op {
				case "done":
					err = s.Done(ctx, h.row, now)
					if ok {
						*m = modelRow{}
					}
				case "retry":
					delay := time.Duration(rapid.IntRange(0, 3).Draw(rt, "delay")) * lease / 2
					err = s.Retry(ctx, h.row, now.Add(delay), hist)
					if ok {
						m.status, m.token, m.dueAt = outbox.StatusPending, "", now.Add(delay)
					}
				case "dead-letter":
					err = s.DeadLetter(ctx, h.row, now, hist)
					if ok {
						m.status, m.token = outbox.StatusFailed, ""
					}
				case "release":
					err = s.Release(ctx, h.row)
					if ok {
						m.status, m.token, m.attempt = outbox.StatusPending, "", m.attempt-1
					}
				}
				expect(op+" "+h.key, ok, err)
			},
			"expire": func(rt *rapid.T) {
				k := rapid.SampledFrom(keys).Draw(rt, "key")
				m := model[k]
				ok := m.exists && m.attempt >= max &&
					(m.status == outbox.StatusClaimed && m.leaseUntil.Before(now) || m.status == outbox.StatusPending && !m.dueAt.After(now))
				err := s.Expire(ctx, outbox.Row{Key: k, Queue: "q"}, now, max, []outbox.AttemptError{{Message: "expired"}})
				expect("expire "+k, ok, err)
				if ok {
					m.status, m.token = outbox.StatusFailed, ""
				}
			},
			"redrive": func(rt *rapid.T) {
				k := rapid.SampledFrom(keys).Draw(rt, "key")
				m := model[k]
				ok := m.exists && m.status == outbox.StatusFailed
				expect("redrive "+k, ok, s.Redrive(ctx, k, now))
				if ok {
					m.status, m.attempt, m.dueAt = outbox.StatusPending, 0, now
				}
			},
			"drop lease": func(rt *rapid.T) {
				// A producer in another language rewrites a claimed row by
				// hand, leaving out lease_until: it counts as lapsed.
				k := rapid.SampledFrom(keys).Draw(rt, "key")
				m := model[k]
				if !m.exists || m.status != outbox.StatusClaimed {
					rt.Skip("not claimed")
				}
				_, err := awstest.DynamoDB(t).UpdateItem(ctx, &dynamodb.UpdateItemInput{
					TableName: aws.String(s.Table()), Key: map[string]types.AttributeValue{dynamo.AttrKey: &types.AttributeValueMemberS{Value: k}},
					UpdateExpression: aws.String("REMOVE #l"), ExpressionAttributeNames: map[string]string{"#l": dynamo.AttrLeaseUntil},
				})
				require.NoError(rt, err)
				m.leaseUntil = time.Time{}
			},
			"advance": func(rt *rapid.T) {
				now = now.Add(time.Duration(rapid.IntRange(1, 4).Draw(rt, "halfLeases")) * lease / 2)
			},
			"": func(rt *rapid.T) {
				for _, k := range keys {
					got, err := s.Get(ctx, k)
					require.NoError(rt, err)
					m := model[k]
					if !m.exists {
						require.Nil(rt, got, k)
						continue
					}
					require.NotNil(rt, got, k)
					require.Equal(rt, m.status, got.Status, k)
					require.Equal(rt, m.attempt, got.Attempt, k)
					require.LessOrEqual(rt, got.Attempt, max, k)
					require.Equal(rt, m.seq, got.Seq, k)
					require.Equal(rt, m.prev, got.Prev, k)
				}
				gotTail, err := s.GroupTail(ctx, "q.fifo", group)
				require.NoError(rt, err)
				require.Equal(rt, tail, gotTail, "the group's tail")
				for _, k := range keys {
					m := model[k]
					link, err := s.Link(ctx, k)
					require.NoError(rt, err)
					require.Equal(rt, m.exists, link.Found, k)
					if m.exists {
						require.Equal(rt, m.status, link.Status, k)
						require.Equal(rt, m.prev, link.Prev, k)
					}
					require.Equal(rt, m.exists && m.unsure, !link.UnsureAt.IsZero(), "%s: unsure_at after a lapsed claim", k)
					// The model's head rule: a successor may go when this
					// row is gone or done, or failed and the policy skips
					// and no lapsed claim of it may yet land, and it has
					// no place to close (this model dead-letters without
					// the closing message: a row with a place then waits
					// for it, Link.Unclosed).
					for _, dh := range []outbox.DeadHead{outbox.DeadHeadBlock, outbox.DeadHeadSkip} {
						want := !m.exists || m.status == outbox.StatusDone || m.status == outbox.StatusFailed && dh == outbox.DeadHeadSkip && !m.unsure && m.seq == 0
						require.Equal(rt, want, link.Settles(dh), "%s %s under %s", k, m.status, dh)
					}
				}
			},
		})
	})
}
