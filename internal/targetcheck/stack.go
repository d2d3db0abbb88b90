package targetcheck

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/outflowhq/outflow/internal/config"
	"github.com/outflowhq/outflow/internal/target"
)

// Stacks reads a deployed stack: its parameters, outputs and resources.
type Stacks interface {
	DescribeStacks(context.Context, *cloudformation.DescribeStacksInput, ...func(*cloudformation.Options)) (*cloudformation.DescribeStacksOutput, error)
	DescribeStackResources(context.Context, *cloudformation.DescribeStackResourcesInput, ...func(*cloudformation.Options)) (*cloudformation.DescribeStackResourcesOutput, error)
}

// FromStack reads what a deployed Outflow stack routes and grants: its
// Routes and OrderedRoutes outputs (what the functions run with, the
// examples' routes included) and its QueueArns, TopicArns and BusArns
// parameters, plus the example targets the stack created when
// ExampleTargets is "true".
func (c Checker) FromStack(ctx context.Context, stacks Stacks, name string) (Input, error) {
	out, err := stacks.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(name)})
	if err != nil {
		return Input{}, fmt.Errorf("stack %q: %w", name, err)
	}
	if len(out.Stacks) != 1 {
		return Input{}, fmt.Errorf("stack %q: %d stacks answer to the name", name, len(out.Stacks))
	}
	st := out.Stacks[0]
	params := map[string]string{}
	for _, p := range st.Parameters {
		params[aws.ToString(p.ParameterKey)] = aws.ToString(p.ParameterValue)
	}
	outputs := map[string]string{}
	for _, o := range st.Outputs {
		outputs[aws.ToString(o.OutputKey)] = aws.ToString(o.OutputValue)
	}
	if outputs["Routes"] == "" {
		return Input{}, fmt.Errorf("stack %q has no Routes output: is it an Outflow stack?", name)
	}
	var in Input
	if in.Routes, err = target.ParseRoutes(outputs["Routes"]); err != nil {
		return Input{}, fmt.Errorf("stack %q: Routes output: %w", name, err)
	}
	ordered, err := config.ParseOrdered(outputs["OrderedRoutes"])
	if err != nil {
		return Input{}, fmt.Errorf("stack %q: OrderedRoutes output: %w", name, err)
	}
	for route := range ordered {
		in.Ordered = append(in.Ordered, route)
	}
	in.Grants = &Grants{Queues: list(params["QueueArns"]), Topics: list(params["TopicArns"]), Buses: list(params["BusArns"])}
	if params["ExampleTargets"] == "true" {
		if err := c.addExamples(ctx, stacks, name, in.Grants); err != nil {
			return Input{}, err
		}
	}
	return in, nil
}

// addExamples grants the example targets the stack created.
func (c Checker) addExamples(ctx context.Context, stacks Stacks, name string, g *Grants) error {
	res, err := stacks.DescribeStackResources(ctx, &cloudformation.DescribeStackResourcesInput{StackName: aws.String(name)})
	if err != nil {
		return fmt.Errorf("stack %q resources: %w", name, err)
	}
	for _, r := range res.StackResources {
		id := aws.ToString(r.PhysicalResourceId)
		switch aws.ToString(r.LogicalResourceId) {
		case "OrdersQueue", "EventsQueue": // the physical id is the URL
			out, err := c.Queues.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(id),
				AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
			if err != nil {
				return fmt.Errorf("stack %q, queue %s: %w", name, id, err)
			}
			g.Queues = append(g.Queues, out.Attributes[string(sqstypes.QueueAttributeNameQueueArn)])
		case "NoticesTopic": // the ARN
			g.Topics = append(g.Topics, id)
		case "DomainBus": // the name
			out, err := c.Buses.DescribeEventBus(ctx, &eventbridge.DescribeEventBusInput{Name: aws.String(id)})
			if err != nil {
				return fmt.Errorf("stack %q, event bus %s: %w", name, id, err)
			}
			g.Buses = append(g.Buses, aws.ToString(out.Arn))
		}
	}
	return nil
}

// list reads a CommaDelimitedList parameter's value: "" is none.
func list(v string) []string {
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}
