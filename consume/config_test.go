package consume_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/consume"
	"github.com/outflowhq/outflow/internal/awstest"
)

// A consumer wired wrong says so at once, in words, instead of panicking
// on its first message or logging SQS's refusal on every receive.
func TestConsumersWiredWrongSayWhatIsWrong(t *testing.T) {
	t.Parallel()
	apply := func(context.Context, consume.Message) error { return nil }
	// A poller that does not refuse polls until its context ends, then
	// returns nil.
	bounded := func() context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		t.Cleanup(cancel)
		return ctx
	}
	tests := []struct {
		name string
		run  func() error
		want string
	}{
		{"a handler without Apply", func() error {
			_, err := consume.Handler{}.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{record("k", "")}})
			return err
		}, "Handler.Apply is required"},
		{"a poller without Apply", func() error {
			return (&consume.Poller{API: awstest.SQS(t), QueueURL: "q"}).Run(bounded())
		}, "API, QueueURL and Apply are required"},
		{"a poller whose visibility is over SQS's 12 hours", func() error {
			return (&consume.Poller{API: awstest.SQS(t), QueueURL: "q", Apply: apply, Visibility: 13 * time.Hour}).Run(bounded())
		}, "Visibility 13h0m0s is over SQS's most, 12h0m0s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var err error
			require.NotPanics(t, func() { err = tc.run() })
			require.ErrorContains(t, err, tc.want)
		})
	}
}
