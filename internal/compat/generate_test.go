package compat_test

// TestGenerate writes a release's directory under conformance/compat from
// the code it is compiled with. It uses only APIs that 0.1.0 had, so the
// same file ran in a worktree of 0.1.0 to make conformance/compat/v0.1.0;
// at each release, run it at the release's commit:
//
//	OUTFLOW_COMPAT_GENERATE=$PWD/conformance/compat/vX.Y.Z go test -count=1 -run TestGenerate ./internal/compat/
//
// and commit the directory. Never regenerate an existing one from any
// code but its release's: it is what that release wrote, and what every
// later release is held to. (v0.1.0 was regenerated once, again in a
// worktree of f45298a, when this generator gained the skip route and the
// ordered SNS FIFO topics, so that closing messages of both reasons in
// both envelopes are frozen: review 49, R49-1.)

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow"
	"github.com/outflowhq/outflow/consume"
	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/compat"
	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/handler"
	"github.com/outflowhq/outflow/internal/operate"
	"github.com/outflowhq/outflow/internal/outbox"
)

// GenerateEnv names the directory TestGenerate writes; unset, it skips.
const GenerateEnv = "OUTFLOW_COMPAT_GENERATE"

const genTrace = "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01"

// refusingDeliverer refuses the rows of the keys it names for good (not
// their places' closing messages) and sends the rest.
type refusingDeliverer struct {
	next outbox.Deliverer
	keys map[string]bool
}

func (r refusingDeliverer) Deliver(ctx context.Context, queue string, rows []outbox.Row) []error {
	errs := make([]error, len(rows))
	var pass []outbox.Row
	var idx []int
	for i, row := range rows {
		if r.keys[row.Key] && row.Closed == "" {
			errs[i] = outbox.Permanent(errors.New("refused by the compat generator"))
			continue
		}
		pass, idx = append(pass, row), append(idx, i)
	}
	for j, err := range r.next.Deliver(ctx, queue, pass) {
		errs[idx[j]] = err
	}
	return errs
}

// received is one message as a consumer queue received it, with where.
type received struct {
	form     string // queue, fifo, ordered, skip, sns-raw, sns-envelope, sns-fifo-raw, sns-fifo-envelope, eventbridge
	queueURL string
	queueARN string
	msg      sqstypes.Message
}

func TestGenerate(t *testing.T) {
	out := os.Getenv(GenerateEnv)
	if out == "" {
		t.Skip(GenerateEnv + " is not set: nothing to generate")
	}
	version := filepath.Base(out)
	// Each release's keys are its own (v0.1.0: v010-…), so fixtures of
	// two releases can share a table.
	prefix := strings.ReplaceAll(version, ".", "") + "-"
	require.NoError(t, os.MkdirAll(out, 0o755))
	ctx := context.Background()
	ddb := awstest.DynamoDB(t)
	table := awstest.NewTable(t)

	// The targets, one of each kind.
	ordersURL := awstest.NewQueue(t, false)
	plainURL := awstest.NewQueue(t, true)
	eventsURL := awstest.NewQueue(t, true)
	topic := awstest.NewTopic(t, false)
	rawURL := awstest.Subscribe(t, topic, false)
	envelopeURL := awstest.NewQueue(t, false)
	_, err := awstest.SNS(t).Subscribe(ctx, &sns.SubscribeInput{TopicArn: aws.String(topic), Protocol: aws.String("sqs"),
		Endpoint: aws.String(awstest.QueueARN(t, envelopeURL))})
	require.NoError(t, err)
	bus, _ := awstest.NewBus(t)
	ruleURL := awstest.RouteEvents(t, bus, compat.BusSource)
	// The ordered routes that close places: an SQS FIFO queue under skip,
	// and two SNS FIFO topics (block and skip), each with a FIFO queue
	// subscribed raw and one in SNS's envelope.
	skipURL := awstest.NewQueue(t, true)
	fifoTopic := func() (arn, raw, envelope string) {
		arn = awstest.NewTopic(t, true)
		raw = awstest.Subscribe(t, arn, true)
		envelope = awstest.NewQueue(t, true)
		_, err := awstest.SNS(t).Subscribe(ctx, &sns.SubscribeInput{TopicArn: aws.String(arn), Protocol: aws.String("sqs"),
			Endpoint: aws.String(awstest.QueueARN(t, envelope))})
		require.NoError(t, err)
		return arn, raw, envelope
	}
	bulletins, bulletinsRaw, bulletinsEnvelope := fifoTopic()
	skipBulletins, skipBulletinsRaw, skipBulletinsEnvelope := fifoTopic()
	routes := map[string]string{
		compat.RouteQueue: ordersURL, compat.RouteFIFO: plainURL, compat.RouteOrdered: eventsURL, compat.RouteTopic: topic,
		compat.RouteBus:  bus + "?source=" + compat.BusSource + "&detail-type=" + compat.BusDetail,
		compat.RouteSkip: skipURL, compat.RouteTopicOrdered: bulletins, compat.RouteTopicSkip: skipBulletins,
	}
	var routeList []string
	for name, target := range routes {
		routeList = append(routeList, name+"="+target)
	}
	slices.Sort(routeList)

	// Phase 1: the sweep function, as deployed, publishes its
	// configuration at its first invocation.
	env := map[string]string{"OUTFLOW_TABLE": table, "OUTFLOW_ROUTES": strings.Join(routeList, ","), "OUTFLOW_ORDERED": compat.OrderedEnv(compat.Ordered),
		"OUTFLOW_SHARDS": "4", "OUTFLOW_WAKE_GRACE": "0s", "AWS_LAMBDA_FUNCTION_NAME": "outflow-SweepFunction-Compat"}
	rt, err := handler.Setup(awstest.TestConfig(t), func(k string) string { return env[k] }, &strings.Builder{})
	require.NoError(t, err)
	_, err = handler.NewSweep(rt).Handle(ctx, json.RawMessage(`{}`))
	require.NoError(t, err)
	published := getItem(t, ddb, table, dynamo.ConfigKey)

	// A producer configured from it, as the README shows.
	pub, err := outflow.LoadPublished(ctx, ddb, table)
	require.NoError(t, err)
	cfg, err := pub.Apply(outflow.Config{})
	require.NoError(t, err)
	producer, err := outflow.NewProducer(ddb, cfg)
	require.NoError(t, err)
	put := func(rows ...outflow.Row) {
		t.Helper()
		for _, r := range rows {
			_, err := producer.Put(ctx, r)
			require.NoError(t, err, r.Key)
		}
	}
	store, err := dynamo.New(ddb, dynamo.Config{Table: table, Shards: 4, DoneRetention: dynamo.DefaultDoneRetention})
	require.NoError(t, err)
	router, err := delivery.New(delivery.Clients{SQS: awstest.SQS(t), SNS: awstest.SNS(t), EventBridge: awstest.EventBridge(t)}, delivery.Routes(routes), 0)
	require.NoError(t, err)
	policy := outbox.DefaultPolicy()
	policy.WakeGrace, policy.BatchLinger, policy.MaxAttempts = 0, 5*time.Millisecond, 1
	policy.Ordered = map[string]outbox.DeadHead{}
	for route, dh := range compat.Ordered {
		policy.Ordered[route] = outbox.DeadHead(dh)
	}
	sweep := func(d outbox.Deliverer) {
		t.Helper()
		e, err := outbox.New(store, d, policy)
		require.NoError(t, err)
		for range 3 {
			_, err := e.Sweep(ctx)
			require.NoError(t, err)
		}
	}
	row := func(key, queue, group, payload string, attrs map[string]string) outflow.Row {
		return outflow.Row{Key: prefix + key, Queue: queue, Group: group, Payload: []byte(payload), Attributes: attrs}
	}

	// Phase 2: rows the sweep settles: delivered, dead-lettered, and an
	// ordered group's dead head purged, its place closed by a message.
	// Under skip a refused row's place is closed (dead-letter) and its
	// group goes on; on the SNS FIFO topics a place is closed each way
	// (bulletin-1's head purged under block, bulletin-2's dead letter
	// under skip).
	text := row("orders-text", compat.RouteQueue, "", `{"order":1}`, map[string]string{"tenant": "acme"})
	text.TraceParent = genTrace
	binary := row("orders-binary", compat.RouteQueue, "", "", nil)
	binary.Payload = []byte{0xff, 0x00, 0x01, 0xfe}
	put(text, binary,
		row("plain-fifo", compat.RouteFIFO, "customer-7", "hello fifo", map[string]string{"tenant": "acme"}),
		row("notices", compat.RouteTopic, "", "a notice", map[string]string{"kind": "notice"}),
		row("domain", compat.RouteBus, "", `{"order":42,"state":"paid"}`, map[string]string{"tenant": "acme"}),
		row("order-1-a", compat.RouteOrdered, "order-1", `{"step":"a"}`, nil),
		row("order-1-b", compat.RouteOrdered, "order-1", `{"step":"b"}`, nil),
		row("order-2-a", compat.RouteOrdered, "order-2", `{"step":"a"}`, nil),
		row("order-2-bad", compat.RouteOrdered, "order-2", `{"step":"bad"}`, nil),
		row("order-2-c", compat.RouteOrdered, "order-2", `{"step":"c"}`, nil),
		row("order-4-bad", compat.RouteOrdered, "order-4", `{"step":"bad"}`, nil),
		row("order-4-b", compat.RouteOrdered, "order-4", `{"step":"b"}`, nil),
		row("orders-refused", compat.RouteQueue, "", `{"order":3}`, nil),
		row("order-5-a", compat.RouteSkip, "order-5", `{"step":"a"}`, nil),
		row("order-5-bad", compat.RouteSkip, "order-5", `{"step":"bad"}`, nil),
		row("order-5-c", compat.RouteSkip, "order-5", `{"step":"c"}`, nil),
		row("bulletin-1-a", compat.RouteTopicOrdered, "bulletin-1", `{"step":"a"}`, map[string]string{"kind": "bulletin"}),
		row("bulletin-1-bad", compat.RouteTopicOrdered, "bulletin-1", `{"step":"bad"}`, map[string]string{"kind": "bulletin"}),
		row("bulletin-1-c", compat.RouteTopicOrdered, "bulletin-1", `{"step":"c"}`, map[string]string{"kind": "bulletin"}),
		row("bulletin-2-a", compat.RouteTopicSkip, "bulletin-2", `{"step":"a"}`, map[string]string{"kind": "bulletin"}),
		row("bulletin-2-bad", compat.RouteTopicSkip, "bulletin-2", `{"step":"bad"}`, map[string]string{"kind": "bulletin"}),
		row("bulletin-2-c", compat.RouteTopicSkip, "bulletin-2", `{"step":"c"}`, map[string]string{"kind": "bulletin"}),
	)
	refused := map[string]bool{}
	for _, k := range []string{"order-2-bad", "order-4-bad", "orders-refused", "order-5-bad", "bulletin-1-bad", "bulletin-2-bad"} {
		refused[prefix+k] = true
	}
	sweep(refusingDeliverer{next: router, keys: refused})
	op, err := dynamo.NewOperator(ddb, dynamo.Config{Table: table, Shards: 4})
	require.NoError(t, err)
	res, err := operate.Purge(ctx, op, []string{prefix + "order-2-bad", prefix + "order-4-bad", prefix + "bulletin-1-bad"}, operate.Selection{}, time.Now(),
		operate.Hold{Now: time.Now(), Wait: policy.UnsureWait()}, func() {})
	require.NoError(t, err)
	require.Equal(t, 3, res.Done)
	// order-4 is frozen here: its purged head pending as the message that
	// closes its place, its next row held behind it.
	snapshot := map[string]compat.Item{}
	for _, k := range []string{prefix + "order-4-bad", prefix + "order-4-b", "group " + compat.RouteOrdered + " order-4"} {
		snapshot[k] = compat.ToJSON(getItem(t, ddb, table, k))
	}
	sweep(router)

	// Every message as its consumer's queue receives it.
	var got []received
	for _, q := range []struct {
		form, url string
		want      int
	}{
		{"queue", ordersURL, 2}, {"fifo", plainURL, 1}, {"ordered", eventsURL, 7},
		{"sns-raw", rawURL, 1}, {"sns-envelope", envelopeURL, 1}, {"eventbridge", ruleURL, 1},
		{"skip", skipURL, 3},
		{"sns-fifo-raw", bulletinsRaw, 3}, {"sns-fifo-envelope", bulletinsEnvelope, 3},
		{"sns-fifo-raw", skipBulletinsRaw, 3}, {"sns-fifo-envelope", skipBulletinsEnvelope, 3},
	} {
		msgs := awstest.Receive(t, q.url, q.want, 10*time.Second)
		require.Len(t, msgs, q.want, q.form)
		for _, m := range msgs {
			got = append(got, received{form: q.form, queueURL: q.url, queueARN: awstest.QueueARN(t, q.url), msg: m})
		}
	}

	// Phase 3: rows left pending, for the next version's sweep.
	delayed := row("pending-delayed", compat.RouteQueue, "", `{"order":5}`, nil)
	delayed.NotBefore = time.Now().Add(30 * time.Second)
	put(row("pending-orders", compat.RouteQueue, "", `{"order":4}`, map[string]string{"tenant": "acme"}), delayed,
		row("pending-plain-fifo", compat.RouteFIFO, "customer-7", "hello again", nil),
		row("pending-notices", compat.RouteTopic, "", "another notice", nil),
		row("pending-domain", compat.RouteBus, "", `{"order":43}`, nil),
		row("order-1-c", compat.RouteOrdered, "order-1", `{"step":"c"}`, nil),
		row("order-3-a", compat.RouteOrdered, "order-3", `{"step":"a"}`, nil),
		row("order-3-b", compat.RouteOrdered, "order-3", `{"step":"b"}`, nil),
	)
	// A row the dispatcher refuses for good: a bus takes a JSON object
	// only. The producer would refuse it; another language's, written by
	// hand, might not.
	require.NoError(t, store.Stage(ctx, outbox.Row{Key: prefix + "pending-invalid", Queue: compat.RouteBus, Payload: []byte("not json")}, time.Now()))

	// The table as the release left it.
	items := scan(t, ddb, table)
	for k, v := range snapshot {
		items[k] = v
	}
	var rows compat.Rows
	rows.Description = "Outbox row items as " + version + " staged and settled them (DynamoDB JSON, as GetItem returns them). " +
		"state: the row's status when captured; expect: what a later version's sweep must make of a pending row. README.md says more."
	var groups compat.Groups
	groups.Description = "Ordered groups' items as " + version + " left them; keys: the group's rows in rows.json, in place order."
	groupKeys := map[string][]string{}
	var keys []string
	for k := range items {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		it := items[k]
		switch {
		case k == dynamo.ConfigKey || strings.HasPrefix(k, "audit ") || strings.HasPrefix(k, "backstop "):
			continue // the published item has a file of its own; the audit's state is the dispatcher's alone
		case strings.HasPrefix(k, "group "):
			parts := strings.SplitN(k, " ", 3)
			groups.Groups = append(groups.Groups, compat.Group{Name: parts[2], Route: parts[1], Group: parts[2], Item: it})
			continue
		}
		r := compat.Row{Name: strings.TrimPrefix(k, prefix), Route: attrS(it, "queue"), Item: it}
		switch attrS(it, "status") {
		case "pending":
			r.State, r.Expect = compat.StatePending, compat.ExpectDelivered
			if attrS(it, "closed") != "" {
				r.Expect = compat.ExpectClosed
			}
			if k == prefix+"pending-invalid" {
				r.Expect = compat.ExpectDeadLetter
			}
		case "done":
			r.State = compat.StateDone
		case "failed":
			r.State = compat.StateDead
		default:
			require.Failf(t, "a row of no known status", "%s: %v", k, it)
		}
		rows.Rows = append(rows.Rows, r)
		if _, ordered := compat.Ordered[r.Route]; ordered && attrS(it, "group") != "" {
			g := r.Route + " " + attrS(it, "group")
			groupKeys[g] = append(groupKeys[g], k)
		}
	}
	for i, g := range groups.Groups {
		ks := groupKeys[g.Route+" "+g.Group]
		slices.SortFunc(ks, func(a, b string) int {
			return strings.Compare(pad(attrN(items[a], "seq")), pad(attrN(items[b], "seq")))
		})
		groups.Groups[i].Keys = ks
	}
	require.NoError(t, compat.Write(out, compat.RowsFile, rows))
	require.NoError(t, compat.Write(out, compat.GroupsFile, groups))

	// The published configuration, and what this version reads it as.
	p, err := dynamo.ReadPublished(ctx, ddb, table)
	require.NoError(t, err)
	var pf compat.Published
	pf.Description = "The dispatcher's published configuration item as " + version + "'s sweep function published it, and what it reads as " +
		"(version: the item's version attribute, \"\" before 1.0.0). The routes' targets are the generator's moto resources."
	pf.Item = compat.ToJSON(published)
	pf.Expect.Routes, pf.Expect.Ordered, pf.Expect.Shards, pf.Expect.MaxMessageBytes = p.Routes, p.Ordered, p.Shards, p.MaxMessageBytes
	pf.Expect.Revision, pf.Expect.PublishedAtMs, pf.Expect.PublishedBy = p.Revision, p.PublishedAt.UnixMilli(), p.PublishedBy
	pf.Expect.UnsureWaitMs, pf.Expect.Lean, pf.Expect.Version = p.UnsureWait.Milliseconds(), p.Lean, attrS(pf.Item, "version")
	require.NoError(t, compat.Write(out, compat.PublishedFile, pf))

	// The messages, in decode.json's form, decoded by this version.
	var msgs compat.Messages
	msgs.Description = "Messages " + version + "'s dispatcher sent, as each consumer queue received them (sdk: the ReceiveMessage message, " +
		"BinaryValue in base64, with its queue's URL) and as Lambda would give the same message (lambda: the record, built from it), " +
		"with what " + version + "'s consume package decoded each to. conformance/consumer/README.md describes the form."
	byName := map[string]consume.Message{}
	for _, r := range got {
		m, err := consume.FromQueue(r.queueURL, r.msg)
		require.NoError(t, err)
		name := strings.TrimPrefix(m.Key, prefix) + "-" + r.form
		if m.Closed != "" {
			name += "-closing"
		}
		byName[name] = m
		sdk := map[string]any{"name": name + "-sdk", "shape": "sdk", "message": sdkMessage(r.msg), "queue_url": r.queueURL, "want": want(m)}
		rec := lambdaRecord(r)
		var ev events.SQSMessage
		b, err := json.Marshal(rec)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, &ev))
		lm, err := consume.FromLambda(ev)
		require.NoError(t, err)
		lam := map[string]any{"name": name + "-lambda", "shape": "lambda", "record": rec, "want": want(lm)}
		for _, v := range []map[string]any{sdk, lam} {
			b, err := json.Marshal(v)
			require.NoError(t, err)
			msgs.Vectors = append(msgs.Vectors, b)
		}
	}
	require.NoError(t, compat.Write(out, compat.MessagesFile, msgs))

	// A consumer's inbox: some messages applied, a place closed; the
	// steps are what this version's Inbox does with more of them.
	ctable := awstest.UniqueName("compat-consumer")
	require.NoError(t, consume.CreateTable(ctx, ddb, ctable))
	inbox, err := consume.NewInbox(ddb, consume.InboxConfig{Table: ctable, Consumer: "ledger", Gaps: consume.GapWait})
	require.NoError(t, err)
	for _, name := range []string{"orders-text-queue", "orders-binary-queue", "plain-fifo-fifo", "notices-sns-raw", "domain-eventbridge",
		"order-1-a-ordered", "order-2-a-ordered", "order-2-bad-ordered-closing", "order-2-c-ordered"} {
		m, ok := byName[name]
		require.True(t, ok, name)
		if m.Closed != "" {
			require.NoError(t, inbox.Close(ctx, m), name)
		} else {
			require.NoError(t, inbox.Apply(ctx, m), name)
		}
	}
	var ib compat.Inbox
	ib.Description = "A consumer's inbox and cursor items as " + version + "'s consume.Inbox (consumer ledger, GapWait) wrote them, " +
		"and what giving it the named messages of messages.json did in " + version + ": a later version must do the same."
	ib.Consumer = "ledger"
	citems := scan(t, ddb, ctable)
	var ckeys []string
	for k := range citems {
		ckeys = append(ckeys, k)
	}
	slices.Sort(ckeys)
	for _, k := range ckeys {
		ib.Items = append(ib.Items, citems[k])
	}
	// The steps, run by this version on a copy of those items.
	copyTable := awstest.UniqueName("compat-consumer")
	require.NoError(t, consume.CreateTable(ctx, ddb, copyTable))
	for _, it := range ib.Items {
		av, err := it.AttributeValues()
		require.NoError(t, err)
		_, err = ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(copyTable), Item: av})
		require.NoError(t, err)
	}
	again, err := consume.NewInbox(ddb, consume.InboxConfig{Table: copyTable, Consumer: "ledger", Gaps: consume.GapWait})
	require.NoError(t, err)
	for _, name := range []string{"order-1-b-ordered", "order-1-a-ordered", "orders-text-queue", "notices-sns-envelope",
		"order-2-bad-ordered-closing", "order-2-c-ordered", "order-4-bad-ordered-closing", "order-4-b-ordered",
		"order-5-a-skip", "order-5-bad-skip-closing", "order-5-c-skip",
		"bulletin-1-a-sns-fifo-envelope", "bulletin-1-bad-sns-fifo-envelope-closing", "bulletin-1-c-sns-fifo-envelope",
		"bulletin-2-a-sns-fifo-raw", "bulletin-2-bad-sns-fifo-raw-closing", "bulletin-2-c-sns-fifo-raw",
		"bulletin-2-c-sns-fifo-envelope"} {
		m, ok := byName[name]
		require.True(t, ok, name)
		step := compat.Step{Op: "apply", Message: name}
		if m.Closed != "" {
			step.Op = "close"
			err = again.Close(ctx, m)
		} else {
			err = again.Apply(ctx, m)
		}
		switch {
		case err == nil && m.Closed != "":
			step.Outcome = "closed"
		case err == nil:
			step.Outcome = "applied"
		case errors.Is(err, consume.ErrDuplicate):
			step.Outcome = "duplicate"
		default:
			require.Failf(t, "an outcome the fixture has no name for", "%s: %v", name, err)
		}
		ib.Steps = append(ib.Steps, step)
	}
	require.NoError(t, compat.Write(out, compat.InboxFile, ib))
	for _, tbl := range []string{ctable, copyTable} {
		_, _ = ddb.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(tbl)})
	}

	// The template, as this version deploys it.
	tpl, err := os.ReadFile(filepath.Join("..", "..", "template.yaml"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(out, compat.TemplateFile), tpl, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(out, compat.ReadmeFile), []byte(readme(version)), 0o644))
}

func getItem(t *testing.T, ddb *dynamodb.Client, table, key string) map[string]ddbtypes.AttributeValue {
	t.Helper()
	out, err := ddb.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		Key: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: key}}})
	require.NoError(t, err)
	require.NotNil(t, out.Item, key)
	return out.Item
}

func scan(t *testing.T, ddb *dynamodb.Client, table string) map[string]compat.Item {
	t.Helper()
	items := map[string]compat.Item{}
	p := dynamodb.NewScanPaginator(ddb, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		require.NoError(t, err)
		for _, it := range page.Items {
			j := compat.ToJSON(it)
			items[j.Key()] = j
		}
	}
	return items
}

func attrS(it compat.Item, name string) string {
	s, _ := it[name]["S"].(string)
	return s
}

func attrN(it compat.Item, name string) string {
	s, _ := it[name]["N"].(string)
	return s
}

func pad(n string) string { return fmt.Sprintf("%020s", n) }

// sdkMessage is m as boto3 gives it (BinaryValue in base64), the form
// decode.json's sdk vectors take.
func sdkMessage(m sqstypes.Message) map[string]any {
	attrs := map[string]any{}
	for k, v := range m.MessageAttributes {
		a := map[string]any{"DataType": aws.ToString(v.DataType)}
		if v.StringValue != nil {
			a["StringValue"] = *v.StringValue
		}
		if v.BinaryValue != nil {
			a["BinaryValue"] = base64.StdEncoding.EncodeToString(v.BinaryValue)
		}
		attrs[k] = a
	}
	return map[string]any{"MessageId": aws.ToString(m.MessageId), "ReceiptHandle": aws.ToString(m.ReceiptHandle),
		"MD5OfBody": aws.ToString(m.MD5OfBody), "Body": aws.ToString(m.Body), "Attributes": m.Attributes, "MessageAttributes": attrs}
}

// lambdaRecord is the SQS event record Lambda would give for r.
func lambdaRecord(r received) map[string]any {
	attrs := map[string]any{}
	for k, v := range r.msg.MessageAttributes {
		a := map[string]any{"stringListValues": []string{}, "binaryListValues": []string{}, "dataType": aws.ToString(v.DataType)}
		if v.StringValue != nil {
			a["stringValue"] = *v.StringValue
		}
		if v.BinaryValue != nil {
			a["binaryValue"] = base64.StdEncoding.EncodeToString(v.BinaryValue)
		}
		attrs[k] = a
	}
	region := strings.Split(r.queueARN, ":")[3]
	return map[string]any{"messageId": aws.ToString(r.msg.MessageId), "receiptHandle": aws.ToString(r.msg.ReceiptHandle),
		"body": aws.ToString(r.msg.Body), "attributes": r.msg.Attributes, "messageAttributes": attrs, "md5OfBody": aws.ToString(r.msg.MD5OfBody),
		"eventSource": "aws:sqs", "eventSourceARN": r.queueARN, "awsRegion": region}
}

// want is m in decode.json's want form.
func want(m consume.Message) map[string]any {
	payload := map[string]string{"text": string(m.Payload)}
	if !utf8.Valid(m.Payload) {
		payload = map[string]string{"base64": base64.StdEncoding.EncodeToString(m.Payload)}
	}
	attrs := m.Attributes
	if attrs == nil {
		attrs = map[string]string{}
	}
	return map[string]any{"key": m.Key, "route": m.Route, "group": m.Group, "seq": m.Seq, "closed": m.Closed, "attempt": m.Attempt,
		"payload": payload, "attributes": attrs, "trace_parent": m.TraceParent, "envelope": string(m.Envelope),
		"message_id": m.MessageID, "receipt_handle": m.ReceiptHandle}
}

func readme(version string) string {
	return "# Outflow " + version + "'s forms, frozen\n\n" +
		"What Outflow " + version + " wrote, generated from " + version + "'s own code by `internal/compat`'s `TestGenerate` " +
		"against the project's moto server: its producer staged the rows, its sweep delivered, dead-lettered and (after an " +
		"operator's purge) closed places, its sweep function published the configuration, and its `consume.Inbox` applied " +
		"messages. **Never edit these files**: they are what " + version + " wrote, and every later release is held to them " +
		"(`internal/compat`'s tests, `internal/stack`'s upgrade from this template, `python/tests/test_compat.py`, " +
		"`typescript/test/compat.test.ts`). A new release adds a directory of its own; see docs/compatibility.md.\n\n" +
		"| file | what it holds |\n| --- | --- |\n" +
		"| `rows.json` | outbox row items in DynamoDB JSON: `state` pending, done or dead when captured (a dead letter of a `skip` " +
		"route carries `closed` dead-letter: its place's closing message was sent); a pending row's `expect`: " +
		"`delivered`, `closed` (a purged dead letter gone back to pending to send the message that closes its place) or " +
		"`dead-letter` (a row staged invalid on purpose: a bus's payload that is not JSON) |\n" +
		"| `groups.json` | ordered groups' items (`group <route> <group>`), with their rows' keys in place order |\n" +
		"| `published.json` | the published configuration item (`config dispatcher`) and what it reads as |\n" +
		"| `inbox.json` | a consumer's inbox and cursor items (consumer `ledger`), and the outcome " + version + " gave for more messages |\n" +
		"| `messages.json` | every message the dispatcher sent, as the consumer's queue received it (`sdk`) and as a Lambda " +
		"record built from it (`lambda`), with what " + version + "'s `consume` decoded it to, in `conformance/consumer/decode.json`'s form |\n" +
		"| `template.yaml` | the SAM template " + version + " deployed |\n\n" +
		"Routes: `orders` an SQS standard queue, `plain.fifo` an SQS FIFO queue, `events.fifo` an ordered SQS FIFO route " +
		"(block), `notices` an SNS standard topic (received through a raw subscription and one in SNS's envelope), " +
		"`domain` an EventBridge bus (`source` shop, `detail-type` order.changed; received through a rule), " +
		"`skipped.fifo` an ordered SQS FIFO route (skip: `order-5-bad` refused, its place closed with reason `dead-letter`), " +
		"`bulletins.fifo` an ordered SNS FIFO topic (block: `bulletin-1-bad` refused and purged, its place closed with reason " +
		"`purged`) and `skipped-bulletins.fifo` one under skip (`bulletin-2-bad` closed with reason `dead-letter`), each received " +
		"through a FIFO queue subscribed raw (`sns-fifo-raw`) and one in SNS's envelope (`sns-fifo-envelope`). The ordered topics' " +
		"and the skip queue's rows are all settled: none is left pending. Queue URLs and " +
		"ARNs are the generator's moto resources; tests route the same names to their own. Timestamps are the generation's: " +
		"every pending row is due by now. The stray-row audit's state item is not frozen: only the dispatcher reads it.\n"
}
