package interop_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/outflowhq/outflow/consume"
	"github.com/outflowhq/outflow/internal/awstest"
)

// goConsumerEnv, set in its environment, makes this test binary the Go
// consumer (TestMain runs goConsumer instead of the tests), so that the
// test can SIGKILL a Go consumer as it does the Python and TypeScript
// ones: a process of its own.
const goConsumerEnv = "OUTFLOW_INTEROP_GO_CONSUMER"

// goConsumer is the Go consumer, as testdata/consumer.py and consumer.mjs
// are the others: package consume's receive loop, Inbox.Poller, bound to
// the inbox the three share, whose effect is the ledger item and the
// group's log; it prints the same lines (see line), and stops when its
// stdin closes. It returns the process's exit status.
func goConsumer() int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "go consumer:", err)
		return 1
	}
	env := func(name string) string { return os.Getenv(name) }
	visibility, err := strconv.Atoi(env("OUTFLOW_INTEROP_VISIBILITY"))
	if err != nil {
		return fail(err)
	}
	cfg, err := awstest.Config(ctx, env("AWS_ENDPOINT_URL"))
	if err != nil {
		return fail(err)
	}
	db := dynamodb.NewFromConfig(cfg)
	inbox, err := consume.NewInbox(db, consume.InboxConfig{Table: env("OUTFLOW_INTEROP_INBOX"), Consumer: env("OUTFLOW_INTEROP_CONSUMER")})
	if err != nil {
		return fail(err)
	}
	ledger := env("OUTFLOW_INTEROP_LEDGER")
	var out sync.Mutex
	say := func(l line) {
		b, _ := json.Marshal(l)
		out.Lock()
		defer out.Unlock()
		_, _ = os.Stdout.Write(append(b, '\n'))
	}
	var counts consume.Counts
	p := inbox.Poller(sqs.NewFromConfig(cfg), env("OUTFLOW_INTEROP_QUEUE_URL"), func(_ context.Context, m consume.Message) ([]types.TransactWriteItem, error) {
		return goEffect(ledger, m), nil
	})
	p.Visibility, p.Wait = time.Duration(visibility)*time.Second, time.Second
	p.OnResult = func(ctx context.Context, r consume.Result) {
		counts.Add(ctx, r)
		l := line{Outcome: string(r.Outcome), Key: r.Message.Key, Group: r.Message.Group, Seq: r.Message.Seq, Closed: r.Message.Closed, Redriven: r.Message.Redriven}
		if r.Err != nil {
			l.Error = r.Err.Error()
		}
		say(l)
	}
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin) // stdin closes: stop
		cancel()
	}()
	say(line{Ready: true})
	if err := p.Run(ctx); err != nil {
		return fail(err)
	}
	all := map[string]int{}
	for _, o := range []consume.Outcome{consume.OutcomeApplied, consume.OutcomeClosed, consume.OutcomeDuplicate, consume.OutcomeLate,
		consume.OutcomeGap, consume.OutcomeFailed, consume.OutcomeSkipped} {
		all[string(o)] = counts.Of(o)
	}
	say(line{Done: true, Counts: all})
	return 0
}

// goEffect is the Go consumer's own writes for m: its ledger item, and
// its group's log (the Python and TypeScript consumers' effect).
func goEffect(ledger string, m consume.Message) []types.TransactWriteItem {
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	return []types.TransactWriteItem{
		{Update: &types.Update{
			TableName:                aws.String(ledger),
			Key:                      map[string]types.AttributeValue{"pk": s("applied " + m.Key)},
			UpdateExpression:         aws.String("SET #key = :key, #group = :group, #seq = :seq, #by = :by ADD #applies :one"),
			ExpressionAttributeNames: map[string]string{"#key": "key", "#group": "group", "#seq": "seq", "#by": "consumer", "#applies": "applies"},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":key": s(m.Key), ":group": s(m.Group), ":seq": &types.AttributeValueMemberN{Value: strconv.FormatInt(m.Seq, 10)},
				":by": s(langGo), ":one": &types.AttributeValueMemberN{Value: "1"},
			},
		}},
		{Update: &types.Update{
			TableName:                aws.String(ledger),
			Key:                      map[string]types.AttributeValue{"pk": s("log " + m.Group)},
			UpdateExpression:         aws.String("SET #log = list_append(if_not_exists(#log, :empty), :key)"),
			ExpressionAttributeNames: map[string]string{"#log": "log"},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":empty": &types.AttributeValueMemberL{Value: []types.AttributeValue{}}, ":key": &types.AttributeValueMemberL{Value: []types.AttributeValue{s(m.Key)}},
			},
		}},
	}
}
