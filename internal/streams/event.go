// Package streams reads the outbox table's DynamoDB stream the way Lambda's
// event source mapping does, and turns its records into the
// events.DynamoDBEvent a wake invocation receives.
package streams

import (
	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// Event builds the Lambda event for records read from the stream.
func Event(streamARN, region string, records []types.Record) events.DynamoDBEvent {
	ev := events.DynamoDBEvent{Records: make([]events.DynamoDBEventRecord, 0, len(records))}
	for _, r := range records {
		rec := events.DynamoDBEventRecord{
			AWSRegion:      region,
			EventID:        aws.ToString(r.EventID),
			EventName:      string(r.EventName),
			EventSource:    "aws:dynamodb",
			EventVersion:   aws.ToString(r.EventVersion),
			EventSourceArn: streamARN,
		}
		if d := r.Dynamodb; d != nil {
			rec.Change = events.DynamoDBStreamRecord{
				Keys:           image(d.Keys),
				NewImage:       image(d.NewImage),
				OldImage:       image(d.OldImage),
				SequenceNumber: aws.ToString(d.SequenceNumber),
				SizeBytes:      aws.ToInt64(d.SizeBytes),
				StreamViewType: string(d.StreamViewType),
			}
			if d.ApproximateCreationDateTime != nil {
				rec.Change.ApproximateCreationDateTime = events.SecondsEpochTime{Time: *d.ApproximateCreationDateTime}
			}
		}
		ev.Records = append(ev.Records, rec)
	}
	return ev
}

func image(m map[string]types.AttributeValue) map[string]events.DynamoDBAttributeValue {
	if m == nil {
		return nil
	}
	out := make(map[string]events.DynamoDBAttributeValue, len(m))
	for k, v := range m {
		out[k] = value(v)
	}
	return out
}

func value(v types.AttributeValue) events.DynamoDBAttributeValue {
	switch x := v.(type) {
	case *types.AttributeValueMemberS:
		return events.NewStringAttribute(x.Value)
	case *types.AttributeValueMemberN:
		return events.NewNumberAttribute(x.Value)
	case *types.AttributeValueMemberB:
		return events.NewBinaryAttribute(x.Value)
	case *types.AttributeValueMemberBOOL:
		return events.NewBooleanAttribute(x.Value)
	case *types.AttributeValueMemberNULL:
		return events.NewNullAttribute()
	case *types.AttributeValueMemberSS:
		return events.NewStringSetAttribute(x.Value)
	case *types.AttributeValueMemberNS:
		return events.NewNumberSetAttribute(x.Value)
	case *types.AttributeValueMemberBS:
		return events.NewBinarySetAttribute(x.Value)
	case *types.AttributeValueMemberL:
		l := make([]events.DynamoDBAttributeValue, len(x.Value))
		for i, e := range x.Value {
			l[i] = value(e)
		}
		return events.NewListAttribute(l)
	case *types.AttributeValueMemberM:
		return events.NewMapAttribute(image(x.Value))
	}
	return events.NewNullAttribute()
}
