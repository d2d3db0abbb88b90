package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow"
	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/cli"
	"github.com/outflowhq/outflow/internal/config"
	"github.com/outflowhq/outflow/internal/console"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

func TestMain(m *testing.M) { os.Exit(awstest.Main(m)) }

// scriptPayload would run, were the console to put a payload into its
// pages unescaped.
const scriptPayload = `<script>document.title="pwned"</script><img src=x onerror="document.title='pwned'">`

// env is a staged table: dead letters of "ghost" (a queue with no route
// while they were swept, one with scriptPayload), of "other", and an
// ordered group on "events.fifo" whose head is dead and blocks two rows.
type env struct {
	table, ghost, events string
	vars                 map[string]string
	op                   *dynamo.Operator
	ghostKeys, group     []string
	scriptKey            string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{table: awstest.NewTable(t), ghost: awstest.NewQueue(t, false), events: awstest.NewQueue(t, true)}
	e.vars = map[string]string{
		"OUTFLOW_TABLE":    e.table,
		"AWS_ENDPOINT_URL": awstest.Endpoint(),
		"AWS_REGION":       "us-east-1",
		"OUTFLOW_ROUTES":   "events.fifo=" + e.events,
		"OUTFLOW_ORDERED":  "events.fifo",
	}
	var err error
	e.op, err = dynamo.NewOperator(awstest.DynamoDB(t), dynamo.Config{Table: e.table, Shards: 4})
	require.NoError(t, err)
	ctx := context.Background()

	p, err := outflow.NewProducer(awstest.DynamoDB(t), outflow.Config{Table: e.table, Shards: 4, Ordered: []string{"events.fifo"}})
	require.NoError(t, err)
	var rows []outflow.Row
	for i := range 3 {
		rows = append(rows, outflow.Row{Key: fmt.Sprintf("ghost-%d", i), Queue: "ghost", Payload: []byte(`{"n":` + fmt.Sprint(i) + `}`)})
	}
	rows = append(rows,
		outflow.Row{Key: "ghost-script", Queue: "ghost", Payload: []byte(scriptPayload), Attributes: map[string]string{"note": `<b>bold</b>`}},
		outflow.Row{Key: "other-0", Queue: "other", Payload: []byte(`{}`)})
	_, err = p.Put(ctx, rows...)
	require.NoError(t, err)
	for i := range 3 {
		body := fmt.Sprintf(`{"n":%d}`, i+1)
		if i == 0 {
			body = `{"n":1,"pad":"` + strings.Repeat("x", 2000) + `"}`
		}
		keys, err := p.Put(ctx, outflow.Row{Key: fmt.Sprintf("g-%d", i+1), Queue: "events.fifo", Group: "g", Payload: []byte(body)})
		require.NoError(t, err)
		e.group = append(e.group, keys...)
	}
	e.ghostKeys = []string{"ghost-0", "ghost-1", "ghost-2"}
	e.scriptKey = "ghost-script"

	// One attempt, and a message limit the group's head exceeds: the
	// ghost and other rows have no route and die, so does the head.
	e.vars["OUTFLOW_MAX_ATTEMPTS"] = "1"
	e.vars["OUTFLOW_MAX_MESSAGE_BYTES"] = "1024"
	s := e.sweep(t)
	require.Equal(t, 6, s.DeadLettered)
	delete(e.vars, "OUTFLOW_MAX_ATTEMPTS")
	delete(e.vars, "OUTFLOW_MAX_MESSAGE_BYTES")
	return e
}

// summary is what outflow sweep --output json reports.
type summary struct {
	Delivered    int `json:"delivered"`
	DeadLettered int `json:"dead_lettered"`
}

func (e *env) sweep(t *testing.T, args ...string) summary {
	t.Helper()
	var out, errb bytes.Buffer
	code := cli.Execute(context.Background(), append([]string{"sweep", "--output", "json"}, args...), &out, &errb, func(k string) string { return e.vars[k] })
	require.Equal(t, cli.ExitOK, code, errb.String())
	var s summary
	require.NoError(t, json.Unmarshal(out.Bytes(), &s))
	return s
}

func (e *env) status(t *testing.T, key string) outbox.Status {
	t.Helper()
	row, err := e.op.Get(context.Background(), key)
	require.NoError(t, err)
	if row == nil {
		return ""
	}
	return row.Status
}

// syncBuffer is output goroutines write while the test reads it.
type syncBuffer = awstest.SyncBuffer

// served is a console serving on a loopback port until the test ends.
type served struct {
	*console.Server
	url string
	log *syncBuffer
}

// serve starts a console on e's table, bound to a free loopback port,
// with adjust applied to its configuration.
func (e *env) serve(t *testing.T, adjust func(*console.Config)) *served {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ordered, err := config.ParseOrdered(e.vars["OUTFLOW_ORDERED"])
	require.NoError(t, err)
	log := &syncBuffer{}
	cfg := console.Config{
		Operator: e.op, Ordered: func(context.Context) (map[string]outbox.DeadHead, error) { return ordered, nil },
		Addr: ln.Addr().String(), Log: slog.New(slog.NewJSONHandler(log, nil)),
	}
	if adjust != nil {
		adjust(&cfg)
	}
	c, err := console.New(cfg)
	require.NoError(t, err)
	srv := &http.Server{Handler: c}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return &served{Server: c, url: "http://" + ln.Addr().String(), log: log}
}
