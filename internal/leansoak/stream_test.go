package leansoak_test

import (
	"cmp"
	"slices"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The stream as the wake's event source mapping reads it: each staged
// row's INSERT record reaches the wake a second or three after the
// write, in batches of up to streamBatch records, unless the mapping is
// off (held until it is on again, and lost if by then older than the
// stream's retention, 24 hours) or throttled (held for minutes, some
// records dropped, as when their age passes the mapping's limit). A
// batch whose invocation crashed is handed to the wake again, up to
// streamRetries times, then discarded; now and then a batch that went
// through is handed over again all the same.
const (
	streamBatch   = 10
	streamRetries = 2
)

// window is a span of the run, as offsets from its start.
type window struct{ from, to time.Duration }

func (w window) holds(d time.Duration) bool { return d >= w.from && d < w.to }

// record is one row's INSERT record: its new image, as the stream
// carries it.
type record struct {
	row   *row
	id    string
	image map[string]events.DynamoDBAttributeValue
}

// arrival is records the mapping hands to the wake at a time: a new
// record, or a whole batch handed over again.
type arrival struct {
	at   time.Time
	seq  int
	recs []*record
	// tries counts the invocations this batch had; whole keeps it a
	// batch of its own (a retry or a redelivery is the same batch).
	tries int
	whole bool
}

// wakeBatch is one invocation's batch, with the faults drawn for it.
type wakeBatch struct {
	recs      []*record
	tries     int
	crash     bool
	outOfTime bool
}

// batches takes the arrivals due at now off the stream, in order, and
// cuts them into the wake's batches: new records together, up to
// streamBatch, a batch handed over again as it was.
func batches(pending []*arrival, now time.Time) (due []*wakeBatch, left []*arrival) {
	var ready []*arrival
	for _, a := range pending {
		if a.at.After(now) {
			left = append(left, a)
		} else {
			ready = append(ready, a)
		}
	}
	slices.SortFunc(ready, func(a, b *arrival) int {
		return cmp.Or(a.at.Compare(b.at), cmp.Compare(a.seq, b.seq))
	})
	var cur *wakeBatch
	for _, a := range ready {
		if a.whole {
			cur = nil
			due = append(due, &wakeBatch{recs: a.recs, tries: a.tries})
			continue
		}
		if cur == nil || len(cur.recs)+len(a.recs) > streamBatch {
			cur = &wakeBatch{}
			due = append(due, cur)
		}
		cur.recs = append(cur.recs, a.recs...)
	}
	return due, left
}

// streamEvent is the batch as the wake's handler receives it.
func streamEvent(recs []*record) events.DynamoDBEvent {
	var ev events.DynamoDBEvent
	for _, r := range recs {
		ev.Records = append(ev.Records, events.DynamoDBEventRecord{
			EventID: r.id, EventName: string(events.DynamoDBOperationTypeInsert), EventSource: "aws:dynamodb",
			Change: events.DynamoDBStreamRecord{NewImage: r.image, StreamViewType: "NEW_IMAGE"},
		})
	}
	return ev
}

// streamImage converts an item as GetItem returns it to a stream
// record's image, attribute by attribute.
func streamImage(item map[string]types.AttributeValue) map[string]events.DynamoDBAttributeValue {
	img := make(map[string]events.DynamoDBAttributeValue, len(item))
	for k, av := range item {
		if v, ok := streamValue(av); ok {
			img[k] = v
		}
	}
	return img
}

func streamValue(av types.AttributeValue) (events.DynamoDBAttributeValue, bool) {
	switch v := av.(type) {
	case *types.AttributeValueMemberS:
		return events.NewStringAttribute(v.Value), true
	case *types.AttributeValueMemberN:
		return events.NewNumberAttribute(v.Value), true
	case *types.AttributeValueMemberB:
		return events.NewBinaryAttribute(v.Value), true
	case *types.AttributeValueMemberBOOL:
		return events.NewBooleanAttribute(v.Value), true
	case *types.AttributeValueMemberNULL:
		return events.NewNullAttribute(), true
	case *types.AttributeValueMemberSS:
		return events.NewStringSetAttribute(v.Value), true
	case *types.AttributeValueMemberNS:
		return events.NewNumberSetAttribute(v.Value), true
	case *types.AttributeValueMemberBS:
		return events.NewBinarySetAttribute(v.Value), true
	case *types.AttributeValueMemberL:
		l := make([]events.DynamoDBAttributeValue, 0, len(v.Value))
		for _, e := range v.Value {
			if ev, ok := streamValue(e); ok {
				l = append(l, ev)
			}
		}
		return events.NewListAttribute(l), true
	case *types.AttributeValueMemberM:
		return events.NewMapAttribute(streamImage(v.Value)), true
	}
	return events.DynamoDBAttributeValue{}, false
}
