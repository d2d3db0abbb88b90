package dynamo

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The audit and the backstop each keep their place in a scan, and what
// they found, in an item of their own (AuditKey, BackstopKey): no status,
// no index keys, saved under a version so an overlapping run that saved
// first keeps its place. attrStateVersion is that version.
const attrStateVersion = "version"

// readStateItem reads the state item key, what naming it in an error.
func (s *Store) readStateItem(ctx context.Context, key, what string, consistent bool) (map[string]types.AttributeValue, error) {
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.cfg.Table), Key: keyOf(key), ConsistentRead: aws.Bool(consistent),
	})
	if err != nil {
		return nil, fmt.Errorf("read the %s item: %w", what, err)
	}
	return out.Item, nil
}

// stateNum is a whole-number attribute of a state item; 0 when it is
// absent or unreadable, as before the first save.
func stateNum(item map[string]types.AttributeValue, name string) int64 {
	if n, ok := item[name].(*types.AttributeValueMemberN); ok {
		v, _ := strconv.ParseInt(n.Value, 10, 64)
		return v
	}
	return 0
}

// saveStateItem applies upd to the state item key if its version is
// still version (0: never saved), and moves the version on. overtaken
// reports that another run saved first, which is no error: its place
// stands.
func (s *Store) saveStateItem(ctx context.Context, key, what string, version int64, upd expression.UpdateBuilder) (overtaken bool, err error) {
	v := expression.Name(attrStateVersion)
	cond := expression.AttributeNotExists(v)
	if version != 0 {
		cond = v.Equal(expression.Value(version))
	}
	expr, err := expression.NewBuilder().WithCondition(cond).WithUpdate(upd.Set(v, expression.Value(version+1))).Build()
	if err != nil {
		return false, fmt.Errorf("build %s save: %w", what, err)
	}
	_, err = s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.cfg.Table), Key: keyOf(key),
		ConditionExpression: expr.Condition(), UpdateExpression: expr.Update(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		return false, nil
	case errors.As(err, &ccf):
		return true, nil
	}
	return false, fmt.Errorf("save the %s item: %w", what, err)
}

// updateStateItem applies upd to the state item key whatever its version:
// what must count though a save did not hold (a total), or must be seen by
// the next run however it read the item.
func (s *Store) updateStateItem(ctx context.Context, key, what string, upd expression.UpdateBuilder) error {
	expr, err := expression.NewBuilder().WithUpdate(upd).Build()
	if err != nil {
		return fmt.Errorf("build %s update: %w", what, err)
	}
	_, err = s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.cfg.Table), Key: keyOf(key), UpdateExpression: expr.Update(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	})
	if err != nil {
		return fmt.Errorf("update the %s item: %w", what, err)
	}
	return nil
}
