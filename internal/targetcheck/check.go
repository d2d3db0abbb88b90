// Package targetcheck checks a deployment's routes against its targets as
// they exist: each queue, topic or bus is there, is FIFO exactly when its
// route's name says so, keeps an order where the route is ordered, and is
// one the functions are granted. Each of these otherwise surfaces only
// once rows are staged: as retries, then dead letters with AccessDenied
// or NonExistentQueue, or as an order silently lost.
package targetcheck

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/outflowhq/outflow/internal/target"
)

// Finding is one problem with one route, and what fixes it.
type Finding struct {
	Route   string `json:"route"`
	Problem string `json:"problem"`
	Fix     string `json:"fix"`
}

// Grants are the ARNs the dispatcher's functions may send to, by kind: the
// template's QueueArns, TopicArns and BusArns, and the targets the stack
// creates itself (ExampleTargets). The template grants each role exactly
// these (internal/stack's TestTemplate_RolesMaySendToExactlyTheArnsGiven).
type Grants struct {
	Queues, Topics, Buses []string
}

// Queues reads a queue's attributes.
type Queues interface {
	GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

// Topics reads a topic's attributes and its subscriptions.
type Topics interface {
	GetTopicAttributes(context.Context, *sns.GetTopicAttributesInput, ...func(*sns.Options)) (*sns.GetTopicAttributesOutput, error)
	ListSubscriptionsByTopic(context.Context, *sns.ListSubscriptionsByTopicInput, ...func(*sns.Options)) (*sns.ListSubscriptionsByTopicOutput, error)
}

// Buses describes an event bus.
type Buses interface {
	DescribeEventBus(context.Context, *eventbridge.DescribeEventBusInput, ...func(*eventbridge.Options)) (*eventbridge.DescribeEventBusOutput, error)
}

// Checker checks routes with the clients of each kind of target.
type Checker struct {
	Queues Queues
	Topics Topics
	Buses  Buses
}

// Input is what a deployment routes: routes by name (OUTFLOW_ROUTES), the
// ordered routes (OUTFLOW_ORDERED's names), and the functions' grants,
// nil where they are not known (then not checked).
type Input struct {
	Routes  target.Routes
	Ordered []string
	Grants  *Grants
}

// Check returns every finding, routes in name order. An error is returned
// only for a failure to ask (a cancelled context); a target the caller may
// not read is a finding, since the check then proves nothing about it.
func (c Checker) Check(ctx context.Context, in Input) ([]Finding, error) {
	var out []Finding
	for _, name := range in.Ordered {
		if _, ok := in.Routes[name]; !ok {
			out = append(out, Finding{name, "is an ordered route (OrderedRoutes) but no route has this name",
				"add it to Routes, or remove it from OrderedRoutes"})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(in.Routes)) {
		fs, err := c.route(ctx, name, in.Routes[name], slices.Contains(in.Ordered, name), in.Grants)
		if err != nil {
			return nil, err
		}
		out = append(out, fs...)
	}
	return out, nil
}

// route checks one route: its target exists, its FIFO-ness, its order and
// its grant.
func (c Checker) route(ctx context.Context, name, dest string, ordered bool, grants *Grants) ([]Finding, error) {
	t, err := target.ParseTarget(dest)
	if err != nil {
		return []Finding{{name, err.Error(), "correct the route's target in Routes"}}, nil
	}
	var p probe
	switch t.Kind {
	case target.KindSQS:
		p, err = c.queue(ctx, t.Address)
	case target.KindSNS:
		p, err = c.topic(ctx, t.Address, ordered)
	case target.KindEventBridge:
		p, err = c.bus(ctx, t.Address)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return []Finding{unreadable(name, t, err)}, nil
	}
	if !p.exists {
		return []Finding{{name, fmt.Sprintf("its %s %s does not exist: every row routed to it is retried, then dead-lettered", kindNoun(t.Kind), t.Address),
			fmt.Sprintf("create the %s (FIFO exactly when the route's name ends in .fifo), or correct the route's target", kindNoun(t.Kind))}}, nil
	}
	var out []Finding
	named := strings.HasSuffix(name, ".fifo")
	if p.fifo != named {
		problem := fmt.Sprintf("the route's name says %s, but its %s %s is %s", fifoWord(named), kindNoun(t.Kind), t.Address, fifoWord(p.fifo))
		if ordered {
			problem += ": the route is ordered (OrderedRoutes), and no order reaches the consumer"
		}
		out = append(out, Finding{name, problem, fifoFix(named, t.Kind)})
	}
	for _, q := range p.standardSubscribers {
		out = append(out, Finding{name, fmt.Sprintf("is ordered, but its topic delivers to the standard queue %s, which keeps no order", q),
			"subscribe a FIFO queue to the topic instead, and consume that"})
	}
	if grants != nil && !slices.Contains(grantsOf(grants, t.Kind), p.arn) {
		out = append(out, Finding{name, fmt.Sprintf("the functions are not granted %s: every send is refused with AccessDenied, and its rows dead-letter", p.arn),
			fmt.Sprintf("add %s to the stack's %s parameter and deploy again", p.arn, grantParameter(t.Kind))})
	}
	return out, nil
}

// probe is what a target is: whether it exists, its ARN, whether it is
// FIFO, and, for an ordered topic, its standard queues.
type probe struct {
	exists, fifo        bool
	arn                 string
	standardSubscribers []string
}

func (c Checker) queue(ctx context.Context, url string) (probe, error) {
	out, err := c.Queues.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn, sqstypes.QueueAttributeNameFifoQueue}})
	if err != nil {
		return probe{}, notFound(err, "AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist")
	}
	return probe{exists: true, arn: out.Attributes[string(sqstypes.QueueAttributeNameQueueArn)],
		fifo: out.Attributes[string(sqstypes.QueueAttributeNameFifoQueue)] == "true"}, nil
}

func (c Checker) topic(ctx context.Context, arn string, ordered bool) (probe, error) {
	out, err := c.Topics.GetTopicAttributes(ctx, &sns.GetTopicAttributesInput{TopicArn: aws.String(arn)})
	if err != nil {
		return probe{}, notFound(err, "NotFound", "NotFoundException")
	}
	p := probe{exists: true, arn: arn, fifo: out.Attributes["FifoTopic"] == "true"}
	if !ordered || !p.fifo {
		return p, nil
	}
	// A FIFO topic may deliver to a standard queue, which keeps no order.
	pages := sns.NewListSubscriptionsByTopicPaginator(c.Topics, &sns.ListSubscriptionsByTopicInput{TopicArn: aws.String(arn)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return probe{}, err
		}
		for _, s := range page.Subscriptions {
			if aws.ToString(s.Protocol) == "sqs" && !strings.HasSuffix(aws.ToString(s.Endpoint), ".fifo") {
				p.standardSubscribers = append(p.standardSubscribers, aws.ToString(s.Endpoint))
			}
		}
	}
	return p, nil
}

func (c Checker) bus(ctx context.Context, nameOrARN string) (probe, error) {
	out, err := c.Buses.DescribeEventBus(ctx, &eventbridge.DescribeEventBusInput{Name: aws.String(nameOrARN)})
	if err != nil {
		return probe{}, notFound(err, "ResourceNotFoundException")
	}
	return probe{exists: true, arn: aws.ToString(out.Arn)}, nil
}

// notFound turns err into a probe of a missing target (nil error) when its
// code is one of codes, and keeps any other error.
func notFound(err error, codes ...string) error {
	var api smithy.APIError
	if errors.As(err, &api) && slices.Contains(codes, api.ErrorCode()) {
		return nil
	}
	return err
}

func unreadable(route string, t target.Target, err error) Finding {
	return Finding{route, fmt.Sprintf("its %s %s could not be read: %v", kindNoun(t.Kind), t.Address, err),
		"run the check with credentials that may read it (sqs:GetQueueAttributes, sns:GetTopicAttributes and sns:ListSubscriptionsByTopic, events:DescribeEventBus), in the target's region"}
}

func kindNoun(k target.Kind) string {
	switch k {
	case target.KindSNS:
		return "topic"
	case target.KindEventBridge:
		return "event bus"
	}
	return "queue"
}

func fifoWord(fifo bool) string {
	if fifo {
		return "FIFO"
	}
	return "standard"
}

func fifoFix(named bool, k target.Kind) string {
	if k == target.KindEventBridge {
		return "an event bus is never FIFO: name the route without .fifo"
	}
	if named {
		return fmt.Sprintf("create the %s as FIFO (FifoQueue or FifoTopic true), or route to a FIFO one", kindNoun(k))
	}
	return "name the route with .fifo at its end, so producers give each row a group"
}

func grantsOf(g *Grants, k target.Kind) []string {
	switch k {
	case target.KindSNS:
		return g.Topics
	case target.KindEventBridge:
		return g.Buses
	}
	return g.Queues
}

func grantParameter(k target.Kind) string {
	switch k {
	case target.KindSNS:
		return "TopicArns"
	case target.KindEventBridge:
		return "BusArns"
	}
	return "QueueArns"
}
