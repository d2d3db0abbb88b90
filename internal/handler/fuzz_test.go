package handler_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/outflowhq/outflow/internal/handler"
)

// FuzzDueInserts feeds arbitrary stream events to the wake's parser: it
// never panics, and every record is either a key to deliver or ignored
// with a reason.
func FuzzDueInserts(f *testing.F) {
	for _, seed := range []string{
		`{"Records":[{"eventID":"1","eventName":"INSERT","dynamodb":{"NewImage":{"pk":{"S":"a"},"status":{"S":"pending"},"due_at":{"N":"5"}}}}]}`,
		`{"Records":[{"eventName":"MODIFY","dynamodb":{"NewImage":{"pk":{"S":"a"}}}},{"eventName":"REMOVE"}]}`,
		`{"Records":[{"eventName":"INSERT","dynamodb":{"NewImage":{"pk":{"N":"1"},"status":{"BOOL":true},"due_at":{"S":"x"}}}}]}`,
		`{"Records":[{"eventName":"INSERT","dynamodb":{"NewImage":{"pk":{"M":{}},"status":{"L":[]},"due_at":{"N":"99999999999999999999"}}}}]}`,
		`{"Records":[{"eventName":"INSERT","dynamodb":{"NewImage":{"pk":{"S":"b"},"status":{"S":"pending"},"due_at":{"N":"5"},"prev":{"S":"a"},"seq":{"S":"2"}}}}]}`,
		`{"Records":[{"eventName":"INSERT","dynamodb":{"NewImage":{"pk":{"S":"b"},"status":{"S":"pending"},"due_at":{"N":"5"},"prev":{"N":"1"},"seq":{"N":"-2"}}}}]}`,
		`{"Records":[{}]}`,
		`{}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var ev events.DynamoDBEvent
		if json.Unmarshal(data, &ev) != nil {
			return
		}
		refs, ignored := handler.DueInserts(ev, time.UnixMilli(10))
		if len(refs)+len(ignored) != len(ev.Records) {
			t.Fatalf("%d records, %d refs, %d ignored", len(ev.Records), len(refs), len(ignored))
		}
		for _, r := range refs {
			if r.Key == "" {
				t.Fatal("an empty key to deliver")
			}
		}
		for _, ig := range ignored {
			if ig.Reason == "" {
				t.Fatal("a record ignored without a reason")
			}
		}
	})
}
