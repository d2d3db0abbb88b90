package targetcheck_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cfntypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/targetcheck"
)

// stackTemplate has what FromStack reads of Outflow's template: the grant
// parameters, an example queue the stack creates with ExampleTargets, and
// the Routes and OrderedRoutes outputs.
const stackTemplate = `
Parameters:
  ExampleTargets: {Type: String}
  Routes: {Type: String}
  OrderedRoutes: {Type: String}
  QueueArns: {Type: CommaDelimitedList}
  TopicArns: {Type: CommaDelimitedList}
  BusArns: {Type: CommaDelimitedList}
Conditions:
  Examples: !Equals [!Ref ExampleTargets, "true"]
Resources:
  OrdersQueue:
    Type: AWS::SQS::Queue
    Condition: Examples
  Placeholder:
    Type: AWS::SQS::Queue
Outputs:
  Routes: {Value: !Ref Routes}
  OrderedRoutes: {Value: !Ref OrderedRoutes}
`

// TestFromStack_ReadsRoutesAndGrantsOfADeployedStack deploys a stack on
// the moto server's CloudFormation and reads back its routes, ordered
// routes and grants, with the stack's own example queue granted only when
// ExampleTargets is "true"; the check then finds the route left ungranted.
func TestFromStack_ReadsRoutesAndGrantsOfADeployedStack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfn := cloudformation.NewFromConfig(awstest.TestConfig(t))
	granted, ungranted := awstest.NewQueue(t, true), awstest.NewQueue(t, false)
	grantedARN := awstest.QueueARN(t, granted)
	topic := awstest.NewTopic(t, false)
	for _, examples := range []string{"false", "true"} {
		t.Run("ExampleTargets="+examples, func(t *testing.T) {
			t.Parallel()
			name := awstest.UniqueName("outflow-check")
			params := map[string]string{"ExampleTargets": examples, "Routes": "ledger.fifo=" + granted + ",billing=" + ungranted + ",alerts=" + topic,
				"OrderedRoutes": "ledger.fifo=skip", "QueueArns": grantedARN, "TopicArns": topic, "BusArns": ""}
			var ps []cfntypes.Parameter
			for k, v := range params {
				ps = append(ps, cfntypes.Parameter{ParameterKey: aws.String(k), ParameterValue: aws.String(v)})
			}
			_, err := cfn.CreateStack(ctx, &cloudformation.CreateStackInput{StackName: aws.String(name), TemplateBody: aws.String(stackTemplate), Parameters: ps})
			require.NoError(t, err)
			t.Cleanup(func() { _, _ = cfn.DeleteStack(ctx, &cloudformation.DeleteStackInput{StackName: aws.String(name)}) })

			c := checker(t)
			in, err := c.FromStack(ctx, cfn, name)
			require.NoError(t, err)
			require.Equal(t, map[string]string{"ledger.fifo": granted, "billing": ungranted, "alerts": topic}, map[string]string(in.Routes))
			require.Equal(t, []string{"ledger.fifo"}, in.Ordered)
			wantQueues := []string{grantedARN}
			if examples == "true" {
				require.Len(t, in.Grants.Queues, 2, "the stack's example queue is granted")
				wantQueues = append(wantQueues, in.Grants.Queues[1])
			}
			require.Equal(t, &targetcheck.Grants{Queues: wantQueues, Topics: []string{topic}}, in.Grants)

			findings, err := c.Check(ctx, in)
			require.NoError(t, err)
			require.Len(t, findings, 1, "%+v", findings)
			require.Equal(t, "billing", findings[0].Route)
			require.Contains(t, findings[0].Problem, "not granted")
		})
	}

	_, err := checker(t).FromStack(ctx, cfn, "no-such-stack")
	require.ErrorContains(t, err, `stack "no-such-stack"`)
}
