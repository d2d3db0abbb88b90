package consume

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/outflowhq/outflow/internal/dynamo"
)

// Attribute names of the items this package writes. An inbox item, a
// group's cursor and an idempotency record each live under one string
// partition key, AttrPK, whose value starts with what the item is
// ("inbox ", "cursor ", "idempotency "), then the consumer's name and the
// message's key or group, separated by spaces (a consumer name holds
// none). Any table whose partition key is a string named AttrPK, with no
// sort key, can hold them beside the consumer's own items.
const (
	AttrPK = "pk"
	// AttrExpiresAt is the TTL attribute, in Unix seconds: turn TTL on
	// for it so DynamoDB deletes expired inbox items and records.
	AttrExpiresAt = "expires_at"

	attrConsumer  = "consumer"
	attrKey       = "key"
	attrGroup     = "group"
	attrSeq       = "seq"
	attrAt        = "at"
	attrSkipped   = "skipped"
	attrGapFrom   = "gap_from"
	attrGapTo     = "gap_to"
	attrLateAfter = "late_after"
	attrApplied   = "applied"
	attrJoined    = "joined"
	// attrJoining marks a group cursor a redriven row started (see
	// JoinWhereSeen): until a message sent in its turn moves it, the group
	// is joined again at its next gap.
	attrJoining   = "joining"
	attrClosed    = "closed"
	attrStatus    = "status"
	attrToken     = "token"
	attrHeldUntil = "held_until"
)

// CreateTable creates a table for inbox items, cursors and idempotency
// records, encrypted, on demand, with TTL on AttrExpiresAt, and waits
// until it is active. A table of that name that can hold them already
// (a string partition key named AttrPK, no sort key) is left as it is and
// nil returned, so a consumer may call it at each start; one with another
// key schema is an error that says so.
func CreateTable(ctx context.Context, api *dynamodb.Client, name string) error {
	in := &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(AttrPK), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(AttrPK), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
		SSESpecification:     &types.SSESpecification{Enabled: aws.Bool(true)},
	}
	err := dynamo.Create(ctx, api, in, AttrExpiresAt)
	var inUse *types.ResourceInUseException
	if !errors.As(err, &inUse) {
		return err
	}
	out, derr := api.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
	if derr != nil {
		return errors.Join(err, derr)
	}
	if !holdsInboxItems(out.Table) {
		return fmt.Errorf("consume: table %s exists, and its key is not one string partition key named %q with no sort key: "+
			"it cannot hold inbox items; name another table", name, AttrPK)
	}
	return nil
}

// holdsInboxItems reports whether t's key is the one string partition key
// AttrPK.
func holdsInboxItems(t *types.TableDescription) bool {
	if t == nil || len(t.KeySchema) != 1 || aws.ToString(t.KeySchema[0].AttributeName) != AttrPK || t.KeySchema[0].KeyType != types.KeyTypeHash {
		return false
	}
	for _, d := range t.AttributeDefinitions {
		if aws.ToString(d.AttributeName) == AttrPK {
			return d.AttributeType == types.ScalarAttributeTypeS
		}
	}
	return false
}
