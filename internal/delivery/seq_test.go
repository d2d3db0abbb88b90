package delivery_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/outbox"
)

func TestDeliver_ToSQS_CarriesAnOrderedRowsPlaceAndNoneForOthers(t *testing.T) {
	t.Parallel()
	url := awstest.NewQueue(t, true)
	d := router(t, delivery.Clients{SQS: awstest.SQS(t)}, delivery.Routes{"events.fifo": url})
	rows := []outbox.Row{
		{Key: "a1", Group: "a", Payload: []byte("1"), Attempt: 1, Seq: 1},
		{Key: "a2", Group: "a", Payload: []byte("2"), Attempt: 1, Seq: 2, Prev: "a1"},
		{Key: "u", Group: "a", Payload: []byte("u"), Attempt: 1},
	}
	for _, err := range d.Deliver(context.Background(), "events.fifo", rows) {
		require.NoError(t, err)
	}
	got := awstest.Receive(t, url, len(rows), 20*time.Second)
	require.Len(t, got, len(rows))
	for i, m := range got {
		seq, ok := m.MessageAttributes[delivery.AttrSeq]
		if rows[i].Seq == 0 {
			require.False(t, ok, "an unordered row has no place")
			continue
		}
		require.Equal(t, strconv.FormatInt(rows[i].Seq, 10), aws.ToString(seq.StringValue))
		require.Equal(t, "Number", aws.ToString(seq.DataType))
	}
}
