package handler

import (
	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

// imageRow reads a stream record's new image as a row, so the wake can
// send it without a claim; nil if it is not a readable row (the claim
// path reads the stored item and dead-letters one that is malformed).
func imageRow(img map[string]events.DynamoDBAttributeValue) *outbox.Row {
	row, err := dynamo.Decode(attributes(img))
	if err != nil {
		return nil
	}
	return &row
}

// attributes converts a stream image to the SDK's attribute values.
func attributes(img map[string]events.DynamoDBAttributeValue) map[string]types.AttributeValue {
	out := make(map[string]types.AttributeValue, len(img))
	for k, v := range img {
		if av := attribute(v); av != nil {
			out[k] = av
		}
	}
	return out
}

// attribute converts one value; nil for a type it does not know, which
// leaves the attribute out (and a row missing one it needs unreadable).
func attribute(v events.DynamoDBAttributeValue) types.AttributeValue {
	switch v.DataType() {
	case events.DataTypeString:
		return &types.AttributeValueMemberS{Value: v.String()}
	case events.DataTypeNumber:
		return &types.AttributeValueMemberN{Value: v.Number()}
	case events.DataTypeBinary:
		return &types.AttributeValueMemberB{Value: v.Binary()}
	case events.DataTypeBoolean:
		return &types.AttributeValueMemberBOOL{Value: v.Boolean()}
	case events.DataTypeNull:
		return &types.AttributeValueMemberNULL{Value: true}
	case events.DataTypeStringSet:
		return &types.AttributeValueMemberSS{Value: v.StringSet()}
	case events.DataTypeNumberSet:
		return &types.AttributeValueMemberNS{Value: v.NumberSet()}
	case events.DataTypeBinarySet:
		return &types.AttributeValueMemberBS{Value: v.BinarySet()}
	case events.DataTypeList:
		l := make([]types.AttributeValue, 0, len(v.List()))
		for _, e := range v.List() {
			if av := attribute(e); av != nil {
				l = append(l, av)
			}
		}
		return &types.AttributeValueMemberL{Value: l}
	case events.DataTypeMap:
		return &types.AttributeValueMemberM{Value: attributes(v.Map())}
	}
	return nil
}
