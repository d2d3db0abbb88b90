package compat_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"maps"
	neturl "net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow"
	"github.com/outflowhq/outflow/consume"
	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/cli"
	"github.com/outflowhq/outflow/internal/compat"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/handler"
	"github.com/outflowhq/outflow/internal/outbox"
	"github.com/outflowhq/outflow/internal/version"
)

// releases is every earlier release's directory, each run as a subtest
// of its own.
func releases(t *testing.T) []compat.Release {
	t.Helper()
	rs, err := compat.Releases()
	require.NoError(t, err)
	return rs
}

// read decodes one fixture file of r.
func read[T any](t *testing.T, r compat.Release, name string) T {
	t.Helper()
	var v T
	require.NoError(t, r.Read(name, &v))
	return v
}

// putItems writes the items into table as they are.
func putItems(t *testing.T, table string, items ...compat.Item) {
	t.Helper()
	ddb := awstest.DynamoDB(t)
	for _, it := range items {
		av, err := it.AttributeValues()
		require.NoError(t, err, it.Key())
		_, err = ddb.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: av})
		require.NoError(t, err, it.Key())
	}
}

// Every file of every release's directory is one the checks below read,
// and every release has all of them: a file added by hand, or left out
// by a generator, fails here rather than going unchecked.
func TestCompat_EveryFixtureFileIsReadByACheck(t *testing.T) {
	t.Parallel()
	for _, r := range releases(t) {
		t.Run(r.Version, func(t *testing.T) {
			t.Parallel()
			require.Regexp(t, `^v\d+\.\d+\.\d+$`, r.Version, "a release's directory is named for its version")
			entries, err := os.ReadDir(r.Dir)
			require.NoError(t, err)
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			require.ElementsMatch(t, compat.Files, names, "the files a release's directory holds, each read by a check")
			readme, err := os.ReadFile(r.Path(compat.ReadmeFile))
			require.NoError(t, err)
			require.Contains(t, string(readme), "Never edit these files")
		})
	}
}

// target is one route's deliveries: where its messages are received, and
// the key of the row each message arrived for, in arrival order.
type targets struct {
	routes map[string]string
	// queues are the queues each route's messages are received from.
	queues map[string]string
}

// newTargets makes, on the test endpoint, a target of the kind each of
// the release's published routes had (an SQS queue, an SNS topic with a
// queue subscribed raw, an EventBridge bus with a rule to a queue; FIFO
// where the route's name ends in .fifo), with a queue that receives its
// messages.
func newTargets(t *testing.T, published map[string]string) targets {
	t.Helper()
	ts := targets{routes: map[string]string{}, queues: map[string]string{}}
	for route, target := range published {
		fifo := strings.HasSuffix(route, ".fifo")
		switch {
		case strings.HasPrefix(target, "arn:aws:sns:"):
			topic := awstest.NewTopic(t, fifo)
			ts.routes[route], ts.queues[route] = topic, awstest.Subscribe(t, topic, fifo)
		case strings.HasPrefix(target, "http://") || strings.HasPrefix(target, "https://"):
			url := awstest.NewQueue(t, fifo)
			ts.routes[route], ts.queues[route] = url, url
		default:
			_, query, ok := strings.Cut(target, "?")
			require.True(t, ok, "%s: %s is a bus with its source and detail-type", route, target)
			q, err := neturl.ParseQuery(query)
			require.NoError(t, err, route)
			bus, _ := awstest.NewBus(t)
			ts.routes[route] = bus + "?source=" + neturl.QueryEscape(q.Get("source")) + "&detail-type=" + neturl.QueryEscape(q.Get("detail-type"))
			ts.queues[route] = awstest.RouteEvents(t, bus, q.Get("source"))
		}
	}
	return ts
}

// routesEnv is the routes as OUTFLOW_ROUTES.
func (ts targets) routesEnv() string {
	var out []string
	for name, target := range ts.routes {
		out = append(out, name+"="+target)
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

// sweepFunction is today's sweep function on table, with the given
// routes, ordered routes (route → block or skip) and the settings the
// fixtures' dispatcher ran with, and extra: a cold start per call.
func sweepFunction(t *testing.T, table, routes string, ordered map[string]string, extra map[string]string) *handler.Sweep {
	t.Helper()
	env := map[string]string{"OUTFLOW_TABLE": table, "OUTFLOW_ROUTES": routes, "OUTFLOW_ORDERED": compat.OrderedEnv(ordered),
		"OUTFLOW_SHARDS": "4", "OUTFLOW_WAKE_GRACE": "0s", "AWS_LAMBDA_FUNCTION_NAME": "outflow-SweepFunction-Today"}
	maps.Copy(env, extra)
	rt, err := handler.Setup(awstest.TestConfig(t), func(k string) string { return env[k] }, &bytes.Buffer{})
	require.NoError(t, err)
	return handler.NewSweep(rt)
}

// sweepUntilSettled runs the sweep until none of keys is pending, at most
// ten passes (one suffices for rows that are due; each group's later rows
// may take one more each).
func sweepUntilSettled(t *testing.T, sweep *handler.Sweep, store *dynamo.Store, keys []string) {
	t.Helper()
	ctx := context.Background()
	for range 10 {
		_, err := sweep.Handle(ctx, json.RawMessage(`{}`))
		require.NoError(t, err)
		pending := 0
		for _, k := range keys {
			row, err := store.Get(ctx, k)
			require.NoError(t, err)
			require.NotNil(t, row, k)
			if row.Status == outbox.StatusPending || row.Status == outbox.StatusClaimed {
				pending++
			}
		}
		if pending == 0 {
			return
		}
	}
	require.FailNow(t, "rows still pending after ten sweeps")
}

// arrived is what arrived on a route's queue, decoded by today's consume.
func arrived(t *testing.T, url string, want int) []consume.Message {
	t.Helper()
	var out []consume.Message
	for _, m := range awstest.Receive(t, url, want, 10*time.Second) {
		msg, err := consume.FromQueue(url, m)
		require.NoError(t, err)
		out = append(out, msg)
	}
	return out
}

// TestCompat_TodaysSweepDeliversTheRowsEveryEarlierReleaseStaged puts an
// earlier release's table, as it left it (rows pending, delivered and
// dead, the ordered groups' items), into a table of today's schema, adds
// a row to each ordered group with today's producer, and runs today's
// sweep function: every pending row reaches its target (or is
// dead-lettered, where it was staged to be), each group in place order
// with today's row after the earlier release's, and the earlier dead
// letter is listed, shown and redriven by today's `outflow dead`, and
// delivered.
func TestCompat_TodaysSweepDeliversTheRowsEveryEarlierReleaseStaged(t *testing.T) {
	t.Parallel()
	for _, r := range releases(t) {
		t.Run(r.Version, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			rows := read[compat.Rows](t, r, compat.RowsFile)
			groups := read[compat.Groups](t, r, compat.GroupsFile)
			ordered := read[compat.Published](t, r, compat.PublishedFile).Expect.Ordered
			table := awstest.NewTable(t)
			ts := newTargets(t, read[compat.Published](t, r, compat.PublishedFile).Expect.Routes)
			ddb := awstest.DynamoDB(t)
			store, err := dynamo.New(ddb, dynamo.Config{Table: table, Shards: 4})
			require.NoError(t, err)

			var pending, deadLetters, settled []string
			byKey := map[string]compat.Row{}
			for _, row := range rows.Rows {
				putItems(t, table, row.Item)
				key := row.Item.Key()
				byKey[key] = row
				switch row.State {
				case compat.StatePending:
					require.Contains(t, []string{compat.ExpectDelivered, compat.ExpectClosed, compat.ExpectDeadLetter}, row.Expect, key)
					pending = append(pending, key)
				case compat.StateDead:
					deadLetters = append(deadLetters, key)
				case compat.StateDone:
					settled = append(settled, key)
				default:
					require.Failf(t, "a row state no check reads", "%s: %q", key, row.State)
				}
			}
			require.NotEmpty(t, pending)
			require.NotEmpty(t, deadLetters)
			for _, g := range groups.Groups {
				putItems(t, table, g.Item)
			}

			// Phase: today's producer continues every earlier group.
			producer, err := outflow.NewProducer(ddb, outflow.Config{Table: table, Shards: 4, Routes: ts.routesEnv(), Ordered: slices.Sorted(maps.Keys(ordered))})
			require.NoError(t, err)
			order := map[string]map[string][]string{} // route → group → keys it must arrive in
			var added []string
			addedTo := map[string][]string{} // route → today's rows on it
			t.Run("today's producer continues each earlier group", func(t *testing.T) {
				for _, g := range groups.Groups {
					require.Contains(t, ordered, g.Route, "%s: a group of an ordered route", g.Name)
					if order[g.Route] == nil {
						order[g.Route] = map[string][]string{}
					}
					key := "today-" + g.Route + "-" + g.Group
					_, err := producer.Put(ctx, outflow.Row{Key: key, Queue: g.Route, Group: g.Group, Payload: []byte(`{"today":true}`)})
					require.NoError(t, err)
					row, err := store.Get(ctx, key)
					require.NoError(t, err)
					last := g.Keys[len(g.Keys)-1]
					require.Equal(t, last, row.Prev, "%s: today's row follows the group's tail", g.Group)
					tail, err := store.Get(ctx, last)
					require.NoError(t, err)
					require.Equal(t, tail.Seq+1, row.Seq, "%s: at the next place", g.Group)
					for _, k := range g.Keys {
						if byKey[k].State == compat.StatePending {
							order[g.Route][g.Group] = append(order[g.Route][g.Group], k)
						}
					}
					order[g.Route][g.Group] = append(order[g.Route][g.Group], key)
					added = append(added, key)
					addedTo[g.Route] = append(addedTo[g.Route], key)
				}
			})

			sweep := sweepFunction(t, table, ts.routesEnv(), ordered, map[string]string{"OUTFLOW_BATCH_LINGER": "5ms"})
			t.Run("today's sweep settles every pending row as staged", func(t *testing.T) {
				sweepUntilSettled(t, sweep, store, append(slices.Clone(pending), added...))
				for _, k := range pending {
					row, err := store.Get(ctx, k)
					require.NoError(t, err)
					want := outbox.StatusDone
					if byKey[k].Expect == compat.ExpectDeadLetter {
						want = outbox.StatusFailed
					}
					require.Equal(t, want, row.Status, k)
				}
				for _, k := range append(slices.Clone(settled), deadLetters...) {
					row, err := store.Get(ctx, k)
					require.NoError(t, err)
					require.Equal(t, map[string]outbox.Status{compat.StateDone: outbox.StatusDone, compat.StateDead: outbox.StatusFailed}[byKey[k].State], row.Status, "%s is left as it was", k)
				}
			})

			t.Run("every message arrives, each group in place order", func(t *testing.T) {
				want := map[string][]string{}
				for _, k := range pending {
					if row := byKey[k]; row.Expect != compat.ExpectDeadLetter {
						want[row.Route] = append(want[row.Route], k)
					}
				}
				for route, keys := range addedTo {
					want[route] = append(want[route], keys...)
				}
				for route, keys := range want {
					msgs := arrived(t, ts.queues[route], len(keys))
					var got []string
					groupOrder := map[string][]string{}
					for _, m := range msgs {
						got = append(got, m.Key)
						if _, ok := ordered[route]; ok {
							groupOrder[m.Group] = append(groupOrder[m.Group], m.Key)
						}
						if byKey[m.Key].Expect == compat.ExpectClosed {
							require.Equal(t, outbox.ClosedPurged, m.Closed, "%s closes its place", m.Key)
						} else {
							require.Empty(t, m.Closed, "%s is a row, not a closing message", m.Key)
						}
					}
					require.ElementsMatch(t, keys, got, route)
					if _, ok := ordered[route]; ok {
						require.Equal(t, order[route], groupOrder, "%s: each group in place order", route)
					}
				}
			})

			t.Run("today's outflow dead lists, shows and redrives the earlier dead letters", func(t *testing.T) {
				vars := map[string]string{"OUTFLOW_TABLE": table, "AWS_ENDPOINT_URL": awstest.Endpoint(), "AWS_REGION": "us-east-1",
					"OUTFLOW_ROUTES": ts.routesEnv()}
				run := func(args ...string) string {
					t.Helper()
					var out, errb bytes.Buffer
					code := cli.Execute(ctx, args, &out, &errb, func(k string) string { return vars[k] })
					require.Equal(t, cli.ExitOK, code, "outflow %v: %s", args, errb.String())
					return out.String()
				}
				var list []struct {
					Key       string `json:"key"`
					LastError string `json:"last_error"`
				}
				require.NoError(t, json.Unmarshal([]byte(run("dead", "list", "--output", "json")), &list))
				var listed []string
				for _, d := range list {
					listed = append(listed, d.Key)
					require.NotEmpty(t, d.LastError, d.Key)
				}
				for _, k := range deadLetters {
					require.Contains(t, listed, k)
				}
				for _, k := range append(slices.Clone(settled), deadLetters...) {
					var shown struct {
						Key    string `json:"key"`
						Queue  string `json:"queue"`
						Status string `json:"status"`
						Seq    int64  `json:"seq"`
					}
					require.NoError(t, json.Unmarshal([]byte(run("dead", "show", k, "--output", "json")), &shown), k)
					require.Equal(t, k, shown.Key)
					require.Equal(t, byKey[k].Route, shown.Queue, k)
					want := map[string]string{compat.StateDone: string(outbox.StatusDone), compat.StateDead: string(outbox.StatusFailed)}[byKey[k].State]
					require.Equal(t, want, shown.Status, k)
					if n, ok := byKey[k].Item["seq"]["N"].(string); ok {
						require.Equal(t, n, strconv.FormatInt(shown.Seq, 10), k)
					}
				}
				run(append([]string{"dead", "redrive"}, deadLetters...)...)
				sweepUntilSettled(t, sweep, store, deadLetters)
				byRoute := map[string][]string{}
				for _, k := range deadLetters {
					byRoute[byKey[k].Route] = append(byRoute[byKey[k].Route], k)
				}
				for route, keys := range byRoute {
					var got []string
					for _, m := range arrived(t, ts.queues[route], len(keys)) {
						got = append(got, m.Key)
					}
					require.ElementsMatch(t, keys, got, route)
				}
			})
		})
	}
}

// TestCompat_TheEarlierPublishedConfigurationReadsAsBeforeAndIsRepublishedWithTheVersion
// puts an earlier release's published configuration item in a table:
// today's LoadPublished reads it as it was written (an item before 1.0.0
// has no version, and reads as ""), and today's sweep function, with the
// same settings, rewrites it at its first invocation with today's
// version, the next revision, and nothing else changed.
func TestCompat_TheEarlierPublishedConfigurationReadsAsBeforeAndIsRepublishedWithTheVersion(t *testing.T) {
	t.Parallel()
	for _, r := range releases(t) {
		t.Run(r.Version, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pf := read[compat.Published](t, r, compat.PublishedFile)
			require.Equal(t, dynamo.ConfigKey, pf.Item.Key())
			table := awstest.NewTable(t)
			putItems(t, table, pf.Item)
			ddb := awstest.DynamoDB(t)
			w := pf.Expect

			pub, err := outflow.LoadPublished(ctx, ddb, table)
			require.NoError(t, err)
			require.Equal(t, w.Routes, pub.Routes)
			require.Equal(t, w.Ordered, pub.Ordered)
			require.Equal(t, w.Shards, pub.Shards)
			require.Equal(t, w.MaxMessageBytes, pub.MaxMessageBytes)
			require.Equal(t, w.Lean, pub.Lean)
			require.Equal(t, w.Version, pub.Version)
			cfg, err := pub.Apply(outflow.Config{})
			require.NoError(t, err, "a producer configures itself from it")
			_, err = outflow.NewProducer(ddb, cfg)
			require.NoError(t, err)

			got, err := dynamo.ReadPublished(ctx, ddb, table)
			require.NoError(t, err)
			require.Equal(t, w.Revision, got.Revision)
			require.Equal(t, w.PublishedAtMs, got.PublishedAt.UnixMilli())
			require.Equal(t, w.PublishedBy, got.PublishedBy)
			require.Equal(t, w.UnsureWaitMs, got.UnsureWait.Milliseconds())

			var routes []string
			for name, target := range w.Routes {
				routes = append(routes, name+"="+target)
			}
			slices.Sort(routes)
			_, err = sweepFunction(t, table, strings.Join(routes, ","), w.Ordered, nil).Handle(ctx, json.RawMessage(`{}`))
			require.NoError(t, err)
			now, err := dynamo.ReadPublished(ctx, ddb, table)
			require.NoError(t, err)
			require.Equal(t, version.Version, now.Version, "today's dispatcher publishes its version")
			require.Equal(t, w.Revision+1, now.Revision)
			require.Empty(t, got.Diff(now), "nothing a producer compares has changed")
			require.Equal(t, got.UnsureWait, now.UnsureWait)
		})
	}
}

// decodeVector is one vector of messages.json, conformance/consumer's
// decode form.
type decodeVector struct {
	Name     string             `json:"name"`
	Shape    string             `json:"shape"`
	Record   *events.SQSMessage `json:"record"`
	Message  *sqstypes.Message  `json:"message"`
	QueueURL *string            `json:"queue_url"`
	Want     struct {
		Key           string            `json:"key"`
		Route         string            `json:"route"`
		Group         string            `json:"group"`
		Seq           int64             `json:"seq"`
		Closed        string            `json:"closed"`
		Attempt       int               `json:"attempt"`
		Payload       map[string]string `json:"payload"`
		Attributes    map[string]string `json:"attributes"`
		TraceParent   string            `json:"trace_parent"`
		Envelope      string            `json:"envelope"`
		MessageID     string            `json:"message_id"`
		ReceiptHandle string            `json:"receipt_handle"`
	} `json:"want"`
}

// decode decodes the vector's message with today's consume, as its shape
// says a consumer receives it.
func (v decodeVector) decode() (consume.Message, error) {
	if v.Shape == "lambda" {
		return consume.FromLambda(*v.Record)
	}
	return consume.FromQueue(*v.QueueURL, *v.Message)
}

func messages(t *testing.T, r compat.Release) map[string]decodeVector {
	t.Helper()
	f := read[compat.Messages](t, r, compat.MessagesFile)
	out := map[string]decodeVector{}
	for _, raw := range f.Vectors {
		var v decodeVector
		require.NoError(t, json.Unmarshal(raw, &v))
		require.Contains(t, []string{"sdk", "lambda"}, v.Shape, v.Name)
		require.NotContains(t, out, v.Name)
		out[v.Name] = v
	}
	return out
}

// Every message an earlier release's dispatcher sent decodes with today's
// FromQueue (as received) and FromLambda (as a Lambda record) to what
// that release's consume made of it.
func TestCompat_TheEarlierMessagesDecodeAsTheyDid(t *testing.T) {
	t.Parallel()
	for _, r := range releases(t) {
		t.Run(r.Version, func(t *testing.T) {
			t.Parallel()
			vs := messages(t, r)
			envelopes := map[string]bool{}
			for name, v := range vs {
				t.Run(name, func(t *testing.T) {
					m, err := v.decode()
					require.NoError(t, err)
					w := v.Want
					payload := []byte(w.Payload["text"])
					if b, ok := w.Payload["base64"]; ok {
						payload, err = base64.StdEncoding.DecodeString(b)
						require.NoError(t, err)
					}
					require.Equal(t, consume.Message{Key: w.Key, Route: w.Route, Group: w.Group, Seq: w.Seq, Closed: w.Closed, Attempt: w.Attempt,
						Payload: payload, Attributes: w.Attributes, TraceParent: w.TraceParent, Envelope: consume.Envelope(w.Envelope),
						MessageID: w.MessageID, ReceiptHandle: w.ReceiptHandle}, m)
				})
				envelopes[v.Want.Envelope] = true
			}
			require.Equal(t, map[string]bool{"sqs": true, "sns": true, "eventbridge": true}, envelopes, "every envelope is frozen")
		})
	}
}

// Every release's messages freeze a closing message of each reason
// (a dead letter under skip, a purge) in each envelope that carries one
// (SQS attributes, which an SNS topic's raw subscription gives too, and
// SNS's JSON envelope), as received and as a Lambda record: otherwise a
// decoder that stopped reading one of them would pass every check here
// (review 49, R49-1: dropping outflow.closed from the SNS envelope did).
func TestCompat_EveryReleaseFreezesEachFormOfClosingMessage(t *testing.T) {
	t.Parallel()
	for _, r := range releases(t) {
		t.Run(r.Version, func(t *testing.T) {
			t.Parallel()
			type form struct{ shape, envelope, reason string }
			got := map[form]bool{}
			for _, v := range messages(t, r) {
				if v.Want.Closed != "" {
					got[form{v.Shape, v.Want.Envelope, v.Want.Closed}] = true
				}
			}
			for _, shape := range []string{"sdk", "lambda"} {
				for _, envelope := range []string{string(consume.EnvelopeSQS), string(consume.EnvelopeSNS)} {
					for _, reason := range []string{outbox.ClosedDeadLetter, outbox.ClosedPurged} {
						require.True(t, got[form{shape, envelope, reason}], "%s: no closing message of reason %s in the %s envelope (%s) is frozen: %v",
							r.Version, reason, envelope, shape, got)
					}
				}
			}
		})
	}
}

// An earlier release's consumer inbox and cursors, in a table of today's
// consume: today's Inbox continues them, applying the next place of a
// group, closing a place, and refusing a copy of what the earlier one
// applied as a duplicate, as that release did.
func TestCompat_TodaysInboxContinuesAnEarlierInbox(t *testing.T) {
	t.Parallel()
	for _, r := range releases(t) {
		t.Run(r.Version, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			ib := read[compat.Inbox](t, r, compat.InboxFile)
			vs := messages(t, r)
			ddb := awstest.DynamoDB(t)
			table := awstest.UniqueName("compat-inbox")
			require.NoError(t, consume.CreateTable(ctx, ddb, table))
			t.Cleanup(func() {
				_, _ = ddb.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
			})
			putItems(t, table, ib.Items...)
			inbox, err := consume.NewInbox(ddb, consume.InboxConfig{Table: table, Consumer: ib.Consumer, Gaps: consume.GapWait})
			require.NoError(t, err)
			outcomes := map[string]bool{}
			for _, s := range ib.Steps {
				v, ok := vs[s.Message+"-sdk"]
				require.True(t, ok, "%s names a message of messages.json", s.Message)
				m, err := v.decode()
				require.NoError(t, err)
				switch s.Op {
				case "apply":
					err = inbox.Apply(ctx, m)
				case "close":
					err = inbox.Close(ctx, m)
				default:
					require.Failf(t, "an op no check reads", "%q", s.Op)
				}
				switch s.Outcome {
				case "applied", "closed":
					require.NoError(t, err, "%s %s", s.Op, s.Message)
				case "duplicate":
					require.ErrorIs(t, err, consume.ErrDuplicate, "%s %s", s.Op, s.Message)
				default:
					require.Failf(t, "an outcome no check reads", "%q", s.Outcome)
				}
				outcomes[s.Outcome] = true
			}
			require.True(t, outcomes["applied"] && outcomes["duplicate"] && outcomes["closed"], "the steps apply, close and refuse a copy: %v", outcomes)
		})
	}
}
