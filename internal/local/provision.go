// Package local runs Outflow on one machine with no Docker: the moto
// server as AWS, the table, queues, topics and event buses created from
// template.yaml, the sweep
// on a local schedule, the wake fed from the table's stream through the
// template's own filter, and a consumer on every queue. It runs the same
// handler code as the Lambdas, or the built bootstraps under the Lambda
// Runtime Interface Emulator.
package local

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dynamotypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/stack"
	consumer "github.com/outflowhq/outflow/internal/subscriber"
)

// Stack is what Provision created: names and URLs by logical resource name,
// and each function's environment with every placeholder filled.
type Stack struct {
	// Prefix starts the name of everything Provision created.
	Prefix    string
	Table     string
	StreamARN string
	// QueueURLs maps a queue's logical name to its URL; DLQs included.
	QueueURLs map[string]string
	// TopicARNs maps a topic's logical name to its ARN.
	TopicARNs map[string]string
	// BusARNs maps an event bus's logical name to its ARN.
	BusARNs map[string]string
	// Env is each function's environment, by logical function name.
	Env map[string]map[string]string
	// Values fills template placeholders: ${Logical} and ${Logical.Attr}.
	Values map[string]string
}

// Clients are the services Provision creates resources in.
type Clients struct {
	DynamoDB    *dynamodb.Client
	SQS         *sqs.Client
	SNS         *sns.Client
	EventBridge *eventbridge.Client
}

// Provision creates the template's table, queues, topics and event buses
// under names that start with prefix (the table under table instead, when
// it is not empty), and resolves both functions' environments against
// them. A table that exists already is refused: it is no run's of its own.
func Provision(ctx context.Context, tpl *stack.Template, c Clients, prefix, table string) (*Stack, error) {
	st := &Stack{Prefix: prefix, QueueURLs: map[string]string{}, TopicARNs: map[string]string{}, BusARNs: map[string]string{},
		Env: map[string]map[string]string{}, Values: map[string]string{}}
	db, q := c.DynamoDB, c.SQS
	tables := tpl.OfType("AWS::DynamoDB::Table")
	if len(tables) != 1 {
		return nil, fmt.Errorf("template has %d tables, want 1", len(tables))
	}
	tb, err := tpl.Table(tables[0])
	if err != nil {
		return nil, err
	}
	st.Table = prefix + "-table"
	if table != "" {
		st.Table = table
		_, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
		var missing *dynamotypes.ResourceNotFoundException
		switch {
		case err == nil:
			return nil, fmt.Errorf("table %s exists at this endpoint already: outflow local makes its own table, so name another with --table, or drop --table for a new name each run", table)
		case !errors.As(err, &missing):
			return nil, fmt.Errorf("table %s: %w", table, err)
		}
	}
	ttl := ""
	if tb.TimeToLiveSpecification.Enabled {
		ttl = tb.TimeToLiveSpecification.AttributeName
	}
	if err := dynamo.Create(ctx, db, tb.CreateTableInput(st.Table), ttl); err != nil {
		return nil, err
	}
	desc, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(st.Table)})
	if err != nil {
		return nil, fmt.Errorf("describe table: %w", err)
	}
	st.StreamARN = aws.ToString(desc.Table.LatestStreamArn)
	st.Values[tables[0]] = st.Table
	st.Values[tables[0]+".Arn"] = aws.ToString(desc.Table.TableArn)
	st.Values[tables[0]+".StreamArn"] = st.StreamARN

	queues, err := tpl.Queues()
	if err != nil {
		return nil, err
	}
	// Dead-letter queues first: the others name them in their redrive policy.
	names := slices.Sorted(maps.Keys(queues))
	slices.SortStableFunc(names, func(a, b string) int {
		return boolInt(queues[a].RedrivePolicy != nil) - boolInt(queues[b].RedrivePolicy != nil)
	})
	for _, name := range names {
		url, arn, err := createQueue(ctx, q, prefix+"-"+strings.ToLower(name), queues[name], st.Values)
		if err != nil {
			return nil, fmt.Errorf("queue %s: %w", name, err)
		}
		st.QueueURLs[name] = url
		st.Values[name] = url
		st.Values[name+".Arn"] = arn
		st.Values[name+".QueueName"] = url[strings.LastIndex(url, "/")+1:]
	}
	if err := provisionTargets(ctx, tpl, c, prefix, st); err != nil {
		return nil, err
	}
	for _, fn := range tpl.OfType("AWS::Serverless::Function") {
		f, err := tpl.Function(fn)
		if err != nil {
			return nil, err
		}
		env := map[string]string{}
		for k, v := range f.Environment.Variables {
			if env[k], err = stack.Substitute(v, st.Values); err != nil {
				return nil, fmt.Errorf("%s environment %s: %w", fn, k, err)
			}
		}
		st.Env[fn] = env
	}
	return st, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func createQueue(ctx context.Context, client *sqs.Client, name string, qd stack.Queue, values map[string]string) (url, arn string, err error) {
	attrs := map[string]string{}
	if qd.FifoQueue {
		name += ".fifo"
		attrs[string(sqstypes.QueueAttributeNameFifoQueue)] = "true"
	}
	if qd.MessageRetentionPeriod > 0 {
		attrs[string(sqstypes.QueueAttributeNameMessageRetentionPeriod)] = fmt.Sprint(qd.MessageRetentionPeriod)
	}
	if rp := qd.RedrivePolicy; rp != nil {
		target, err := stack.Substitute(rp.DeadLetterTargetArn, values)
		if err != nil {
			return "", "", err
		}
		attrs[string(sqstypes.QueueAttributeNameRedrivePolicy)] = fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"%d"}`, target, rp.MaxReceiveCount)
	}
	out, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		return "", "", err
	}
	url = aws.ToString(out.QueueUrl)
	arn, err = consumer.QueueARN(ctx, client, url)
	return url, arn, err
}
