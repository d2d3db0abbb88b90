package delivery_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/consume"
	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/outbox"
	"github.com/outflowhq/outflow/internal/target"
)

// redrivenRows are the rows each target is given: which carry
// outflow.redriven as they arrive, keyed by row key.
type redrivenRow struct {
	row    outbox.Row
	marked bool
}

// fullAttributes is as many attributes of its own as a row of an ordered
// route could carry before 1.0.0 (7, one more than MaxOrderedAttributes,
// which keeps room for the mark): its message carries SQS's 10 with
// outflow.key, outflow.attempt and outflow.seq, and a redriven copy goes
// unmarked.
func fullAttributes() map[string]string {
	attrs := map[string]string{}
	for i := range 7 {
		attrs["a"+strconv.Itoa(i)] = "v"
	}
	return attrs
}

// atLimit pads row's payload so that its message, unmarked, is exactly
// the default size limit: the mark's bytes would put it over.
func atLimit(t *testing.T, row outbox.Row, fifo bool) outbox.Row {
	t.Helper()
	row.Payload = []byte("x")
	m, err := target.NewMessage(row, fifo)
	require.NoError(t, err)
	row.Payload = []byte(strings.Repeat("x", target.MaxMessageBytes-m.Size+1))
	m, err = target.NewMessage(row, fifo)
	require.NoError(t, err)
	require.Equal(t, target.MaxMessageBytes, m.Size)
	return row
}

func TestDeliver_MarksEveryCopyOfARedrivenRowWhereTheMarkFits(t *testing.T) {
	t.Parallel()
	redrove := time.UnixMilli(1_700_000_000_000)
	queueRows := func(t *testing.T, fifo bool) []redrivenRow {
		row := func(key string, seq int64) outbox.Row {
			return outbox.Row{Key: key, Group: "g", Seq: seq, Payload: []byte(`{"n":1}`), Attempt: 1}
		}
		fresh := row("fresh", 1)
		redriven := row("redriven", 2)
		redriven.RedrivenAt = redrove
		retried := row("redriven-attempt-3", 3)
		retried.RedrivenAt, retried.Attempt = redrove, 3
		full := row("full-budget", 4)
		full.RedrivenAt, full.Attributes = redrove, fullAttributes()
		closing := row("closing", 5)
		closing.RedrivenAt, closing.Closed = redrove, outbox.ClosedDeadLetter
		limit := row("size-limit", 6)
		limit.RedrivenAt = redrove
		return []redrivenRow{
			{fresh, false}, {redriven, true}, {retried, true},
			{full, false}, {closing, true}, {atLimit(t, limit, fifo), false},
		}
	}
	cases := []struct {
		name string
		// setup returns the deliverer's clients, the route, where the
		// messages arrive, and the rows.
		setup func(t *testing.T) (delivery.Clients, delivery.Routes, string, []redrivenRow)
	}{
		{"an SQS FIFO queue", func(t *testing.T) (delivery.Clients, delivery.Routes, string, []redrivenRow) {
			url := awstest.NewQueue(t, true)
			return delivery.Clients{SQS: awstest.SQS(t)}, delivery.Routes{"r.fifo": url}, url, queueRows(t, true)
		}},
		{"an SNS FIFO topic's raw subscriber", func(t *testing.T) (delivery.Clients, delivery.Routes, string, []redrivenRow) {
			topic := awstest.NewTopic(t, true)
			sub := awstest.Subscribe(t, topic, true)
			return delivery.Clients{SNS: awstest.SNS(t)}, delivery.Routes{"r.fifo": topic}, sub, queueRows(t, true)
		}},
		{"an EventBridge bus's rule", func(t *testing.T) (delivery.Clients, delivery.Routes, string, []redrivenRow) {
			bus, _ := awstest.NewBus(t)
			sub := awstest.RouteEvents(t, bus, "app")
			row := func(key string) outbox.Row {
				return outbox.Row{Key: key, Payload: []byte(`{"n":1}`), Attempt: 1}
			}
			redriven := row("redriven")
			redriven.RedrivenAt = redrove
			many := row("many-attributes")
			many.RedrivenAt, many.Attributes = redrove, fullAttributes()
			many.Attributes["a7"], many.Attributes["a8"] = "v", "v"
			return delivery.Clients{EventBridge: awstest.EventBridge(t)}, delivery.Routes{"r": bus + "?source=app&detail-type=T"}, sub,
				[]redrivenRow{{row("fresh"), false}, {redriven, true}, {many, true}}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			clients, routes, url, rows := c.setup(t)
			var route string
			for r := range routes {
				route = r
			}
			d := router(t, clients, routes)
			given := make([]outbox.Row, len(rows))
			want := map[string]bool{}
			for i, r := range rows {
				given[i], want[r.row.Key] = r.row, r.marked
			}
			for i, err := range d.Deliver(context.Background(), route, given) {
				require.NoError(t, err, given[i].Key)
			}
			got := map[string]bool{}
			for _, m := range awstest.Receive(t, url, len(rows), 20*time.Second) {
				require.LessOrEqual(t, len(m.MessageAttributes), target.MaxAttributes)
				if v, ok := m.MessageAttributes[delivery.AttrRedriven]; ok {
					require.Equal(t, target.RedrivenValue, *v.StringValue)
					require.Equal(t, "String", *v.DataType)
				}
				cm, err := consume.FromQueue(url, m)
				require.NoError(t, err)
				got[cm.Key] = cm.Redriven
			}
			require.Equal(t, want, got, "each row arrived once, marked if and only if it was redriven and the mark fits")
		})
	}
}
