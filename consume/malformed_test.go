package consume_test

import (
	"errors"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/outflowhq/outflow/consume"
)

// message is an SDK message with body and String attributes.
func message(body string, attrs map[string]string) types.Message {
	m := types.Message{MessageId: aws.String("id"), Body: aws.String(body), MessageAttributes: map[string]types.MessageAttributeValue{}}
	for k, v := range attrs {
		m.MessageAttributes[k] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}
	return m
}

func TestFromSQS_RefusesMalformedMessagesWithATypedError(t *testing.T) {
	t.Parallel()
	ok := map[string]string{"outflow.key": "k", "outflow.attempt": "1"}
	with := func(k, v string) map[string]string {
		m := map[string]string{}
		for a, b := range ok {
			m[a] = b
		}
		m[k] = v
		return m
	}
	tests := []struct {
		name string
		msg  types.Message
		want error
	}{
		{"a body with no attributes", message("hello", nil), consume.ErrNotOutflow},
		{"a JSON body that is no envelope", message(`{"a":1}`, nil), consume.ErrNotOutflow},
		{"a JSON array", message(`[1,2]`, nil), consume.ErrNotOutflow},
		{"an empty key", message("p", with("outflow.key", "")), consume.ErrMalformed},
		{"no attempt", message("p", map[string]string{"outflow.key": "k"}), consume.ErrMalformed},
		{"an attempt of 0", message("p", with("outflow.attempt", "0")), consume.ErrMalformed},
		{"an attempt that is no number", message("p", with("outflow.attempt", "x")), consume.ErrMalformed},
		{"a place of 0", message("p", with("outflow.seq", "0")), consume.ErrMalformed},
		{"a place past int64", message("p", with("outflow.seq", "9223372036854775808")), consume.ErrMalformed},
		{"a body that is not its base64", message("***", with("outflow.encoding", "base64")), consume.ErrMalformed},
		{"an unknown encoding", message("p", with("outflow.encoding", "gzip")), consume.ErrMalformed},
		{"an SNS envelope without a key", message(`{"Type":"Notification","TopicArn":"t","Message":"m"}`, nil), consume.ErrNotOutflow},
		{"an SNS envelope with a bad attempt", message(`{"Type":"Notification","TopicArn":"t","Message":"m","MessageAttributes":{"outflow.key":{"Type":"String","Value":"k"},"outflow.attempt":{"Type":"Number","Value":"-1"}}}`, nil), consume.ErrMalformed},
		{"an event with no outflow member", message(`{"detail-type":"T","source":"s","detail":{"a":1}}`, nil), consume.ErrNotOutflow},
		{"an event whose detail is no object", message(`{"detail-type":"T","source":"s","detail":[1]}`, nil), consume.ErrNotOutflow},
		{"an event whose outflow member is no object", message(`{"detail-type":"T","source":"s","detail":{"outflow":3}}`, nil), consume.ErrMalformed},
		{"an event with an empty key", message(`{"detail-type":"T","source":"s","detail":{"outflow":{"key":"","attempt":1}}}`, nil), consume.ErrMalformed},
		{"an event with no attempt", message(`{"detail-type":"T","source":"s","detail":{"outflow":{"key":"k"}}}`, nil), consume.ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := consume.FromSQS(tt.msg)
			require.ErrorIs(t, err, tt.want)
			var de *consume.DecodeError
			require.ErrorAs(t, err, &de)
			require.Equal(t, "id", de.MessageID)
		})
	}
}

// Whatever arrives, the decoders return a message or a *DecodeError, and
// never panic.
func TestFromLambda_AnyInputGivesAMessageOrADecodeError(t *testing.T) {
	t.Parallel()
	names := rapid.SampledFrom([]string{"outflow.key", "outflow.attempt", "outflow.seq", "outflow.encoding", "traceparent", "type"})
	fragments := rapid.SampledFrom([]string{
		`{`, `}`, `[`, `]`, `"`, `,`, `:`, `"Type":"Notification"`, `"Message":`, `"TopicArn":"t"`,
		`"MessageAttributes":{"outflow.key":{"Type":"String","Value":"k"}}`, `"detail-type":"T"`, `"detail":`,
		`"outflow":`, `{"key":"k","attempt":1}`, `"attempt":`, `1`, `-1`, `null`, `"x"`, `base64`, `\u0000`,
	})
	rapid.Check(t, func(t *rapid.T) {
		body := ""
		for _, f := range rapid.SliceOfN(fragments, 0, 20).Draw(t, "fragments") {
			body += f
		}
		attrs := map[string]events.SQSMessageAttribute{}
		for _, n := range rapid.SliceOfN(names, 0, 5).Draw(t, "names") {
			v := rapid.SampledFrom([]string{"", "k", "1", "0", "base64", "-3", "x"}).Draw(t, "value")
			attrs[n] = events.SQSMessageAttribute{StringValue: &v, DataType: "String"}
		}
		m, err := consume.FromLambda(events.SQSMessage{MessageId: "id", Body: body, MessageAttributes: attrs})
		if err != nil {
			var de *consume.DecodeError
			if !errors.As(err, &de) || (!errors.Is(err, consume.ErrMalformed) && !errors.Is(err, consume.ErrNotOutflow)) {
				t.Fatalf("error %v is not a DecodeError", err)
			}
			return
		}
		if m.Key == "" || m.Attempt < 1 || m.Seq < 0 {
			t.Fatalf("decoded a message without a key or attempt: %+v", m)
		}
	})
}

func FuzzFromLambda(f *testing.F) {
	f.Add(`{"detail-type":"T","source":"s","detail":{"outflow":{"key":"k","attempt":1},"a":1}}`, "", "")
	f.Add(`{"Type":"Notification","TopicArn":"t","Message":"m"}`, "k", "1")
	f.Add("body", "k", "2")
	f.Fuzz(func(t *testing.T, body, key, attempt string) {
		attrs := map[string]events.SQSMessageAttribute{}
		if key != "" {
			attrs["outflow.key"] = events.SQSMessageAttribute{StringValue: &key}
			attrs["outflow.attempt"] = events.SQSMessageAttribute{StringValue: &attempt}
		}
		_, err := consume.FromLambda(events.SQSMessage{Body: body, MessageAttributes: attrs})
		var de *consume.DecodeError
		if err != nil && !errors.As(err, &de) {
			t.Fatalf("error %v is not a DecodeError", err)
		}
	})
}
