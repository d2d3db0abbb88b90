package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/spf13/cobra"

	"github.com/outflowhq/outflow/internal/moto"
)

// motoAccount is the account moto puts every resource in.
const motoAccount = "123456789012"

// motoCommand runs the patched moto server that every test and `outflow
// local` use, on a port the user chooses, so that they can create their
// own queues and topics in it before a stack starts, and point their own
// code at it. Plain moto_server is not enough: two concurrent
// conditional writes to one item can both succeed there, which breaks a
// group's chain of places (docs/local.md).
func (a *app) motoCommand() *cobra.Command {
	var port int
	var queues, topics []string
	cmd := &cobra.Command{
		Use:   "moto",
		Short: "Run a local AWS of your own (the patched moto server) on a fixed port, with your queues and topics, until Ctrl-C",
		Long: "moto runs the moto server from .venv with the patch every test runs it with (atomic conditional writes, " +
			"which plain moto_server lacks), on 127.0.0.1:--port, creates the queues and topics you name (FIFO when the " +
			"name ends in .fifo), prints their URLs and ARNs and the environment your shell needs, and runs until Ctrl-C. " +
			"Then deploy Outflow into it with `outflow local --endpoint http://127.0.0.1:PORT --no-demo --param ...`.",
		Example: "  outflow moto --port 5055 --queue billing-events --queue orders.fifo",
		Args:    args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if port < 0 || port > 65535 {
				return usagef("--port %d: want 1 to 65535, or 0 for a free port", port)
			}
			for _, name := range slices.Concat(queues, topics) {
				if name == "" || strings.ContainsAny(name, "/:, ") {
					return usagef("%q is not a queue or topic name (a name, not a URL or ARN)", name)
				}
			}
			return a.runMoto(cmd.Context(), strconv.Itoa(port), queues, topics)
		},
	}
	f := cmd.Flags()
	f.IntVar(&port, "port", 5055, "loopback port to serve on (0: a free one)")
	f.StringArrayVar(&queues, "queue", nil, "create this SQS queue, FIFO if it ends in .fifo (repeatable)")
	f.StringArrayVar(&topics, "topic", nil, "create this SNS topic, FIFO if it ends in .fifo (repeatable)")
	return cmd
}

func (a *app) runMoto(ctx context.Context, port string, queues, topics []string) error {
	m, err := moto.StartOn(ctx, port)
	if err != nil {
		return err
	}
	defer m.Stop()
	a.endpoint = m.URL
	if a.region == "" {
		a.region = "us-east-1"
	}
	cfg, err := a.awsConfig(ctx)
	if err != nil {
		return err
	}
	w := a.stdout
	fmt.Fprintf(w, "outflow moto: the patched moto server (atomic conditional writes) at %s, region %s, account %s\n", m.URL, a.region, motoAccount)
	if err := createQueues(ctx, sqs.NewFromConfig(cfg), queues, w); err != nil {
		return err
	}
	if err := createTopics(ctx, sns.NewFromConfig(cfg), topics, w); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nin your shell (and for `outflow local --endpoint`, your producer and your consumer):")
	// boto3 reads AWS_DEFAULT_REGION, not AWS_REGION.
	fmt.Fprintf(w, "export AWS_ENDPOINT_URL=%s AWS_REGION=%s AWS_DEFAULT_REGION=%s AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test\n", m.URL, a.region, a.region)
	fmt.Fprintln(w, "\nrunning until Ctrl-C; everything in it is lost when it stops")
	<-ctx.Done()
	return nil
}

func createQueues(ctx context.Context, client *sqs.Client, names []string, w io.Writer) error {
	for _, name := range names {
		in := &sqs.CreateQueueInput{QueueName: aws.String(name)}
		if strings.HasSuffix(name, ".fifo") {
			in.Attributes = map[string]string{string(sqstypes.QueueAttributeNameFifoQueue): "true"}
		}
		out, err := client.CreateQueue(ctx, in)
		if err != nil {
			return fmt.Errorf("create queue %q: %w", name, err)
		}
		attrs, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: out.QueueUrl,
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
		if err != nil {
			return fmt.Errorf("queue %q: %w", name, err)
		}
		fmt.Fprintf(w, "  queue %-20s %s  %s\n", name, aws.ToString(out.QueueUrl), attrs.Attributes[string(sqstypes.QueueAttributeNameQueueArn)])
	}
	return nil
}

func createTopics(ctx context.Context, client *sns.Client, names []string, w io.Writer) error {
	for _, name := range names {
		in := &sns.CreateTopicInput{Name: aws.String(name)}
		if strings.HasSuffix(name, ".fifo") {
			in.Attributes = map[string]string{"FifoTopic": "true"}
		}
		out, err := client.CreateTopic(ctx, in)
		if err != nil {
			return fmt.Errorf("create topic %q: %w", name, err)
		}
		fmt.Fprintf(w, "  topic %-20s %s\n", name, aws.ToString(out.TopicArn))
	}
	return nil
}
