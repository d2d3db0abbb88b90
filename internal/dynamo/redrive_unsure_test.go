package dynamo_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

// A dead letter whose place's closing message may have reached the
// consumer (closed unsure or purge-unsure) is not redriven, since it
// could arrive after its place was closed and be applied nowhere: Redrive
// says why (MayHaveClosedError) and changes nothing, RedriveLate moves it.
// Every other dead letter is redriven as before. A purge treats unsure as
// it treats unsent: its closing message goes again, and after a purge's
// (purge-unsure) a second purge deletes the row (issue 50, item 3).
func TestRedrive_RefusesAPlaceWhoseClosingMessageMayHaveLanded(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		closed  string
		refused bool
		// purged is what a purge leaves: the closed of a row back to
		// pending to send its closing message, or "" if it is deleted.
		purged string
	}{
		{name: "never closed", closed: "", purged: outbox.ClosedPurged},
		{name: "closed by its message", closed: outbox.ClosedDeadLetter, purged: ""},
		{name: "its closing message not sent", closed: outbox.ClosedUnsent, purged: outbox.ClosedPurged},
		{name: "its closing message may have landed", closed: outbox.ClosedUnsure, refused: true, purged: outbox.ClosedPurged},
		{name: "its purge's closing message not sent", closed: outbox.ClosedPurgeUnsent, purged: ""},
		{name: "its purge's closing message may have landed", closed: outbox.ClosedPurgeUnsure, refused: true, purged: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			api := awstest.DynamoDB(t)
			cfg := dynamo.Config{Table: awstest.NewTable(t), Shards: 2}
			store, err := dynamo.New(api, cfg)
			require.NoError(t, err)
			op, err := dynamo.NewOperator(api, cfg)
			require.NoError(t, err)
			now := time.Now()
			dead := func(key string) {
				require.NoError(t, store.Stage(ctx, outbox.Row{Key: key, Queue: "events.fifo", Group: "g", Seq: 1, Payload: []byte("{}")}, now))
				upd := "SET #s = :f, #f = :t REMOVE #sh, #d, #c"
				values := map[string]types.AttributeValue{":f": &types.AttributeValueMemberS{Value: string(outbox.StatusFailed)}, ":t": &types.AttributeValueMemberN{Value: "1"}}
				if tt.closed != "" {
					upd = "SET #s = :f, #f = :t, #c = :c REMOVE #sh, #d"
					values[":c"] = &types.AttributeValueMemberS{Value: tt.closed}
				}
				_, err := api.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(cfg.Table),
					Key:              map[string]types.AttributeValue{dynamo.AttrKey: &types.AttributeValueMemberS{Value: key}},
					UpdateExpression: aws.String(upd), ExpressionAttributeNames: map[string]string{"#s": dynamo.AttrStatus, "#f": dynamo.AttrFailedAt, "#sh": dynamo.AttrShard, "#d": dynamo.AttrDueAt, "#c": dynamo.AttrClosed}, ExpressionAttributeValues: values})
				require.NoError(t, err)
			}

			dead("r")
			err = store.Redrive(ctx, "r", now)
			got, gerr := store.Get(ctx, "r")
			require.NoError(t, gerr)
			if tt.refused {
				var refused *dynamo.MayHaveClosedError
				require.ErrorAs(t, err, &refused)
				require.Equal(t, tt.closed, refused.Closed)
				require.Contains(t, err.Error(), "purge it")
				require.Equal(t, outbox.StatusFailed, got.Status, "a refused redrive changes nothing")
				require.Equal(t, tt.closed, got.Closed)
				require.NoError(t, store.RedriveLate(ctx, "r", now), "redriven as late, it moves")
				got, gerr = store.Get(ctx, "r")
				require.NoError(t, gerr)
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, outbox.StatusPending, got.Status)
			require.Empty(t, got.Closed, "a redriven row goes as itself")

			dead("p")
			require.NoError(t, op.Purge(ctx, "p", now, time.Time{}, dynamo.UnsureBound{}))
			got, gerr = store.Get(ctx, "p")
			require.NoError(t, gerr)
			if tt.purged == "" {
				require.Nil(t, got, "deleted")
				return
			}
			require.NotNil(t, got)
			require.Equal(t, outbox.StatusPending, got.Status, "its closing message goes again")
			require.Equal(t, tt.purged, got.Closed)
		})
	}
}
