package stack_test

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/config"
	"github.com/outflowhq/outflow/internal/stack"
)

// Your own targets, as an adopter passes them: two queues (one FIFO), a
// topic and a bus of another stack, and a key one of them is under.
const (
	ownQueue     = "arn:aws:sqs:us-east-1:123456789012:billing"
	ownFifoQueue = "arn:aws:sqs:us-east-1:123456789012:ledger.fifo"
	ownTopic     = "arn:aws:sns:us-east-1:123456789012:alerts"
	ownBus       = "arn:aws:events:us-east-1:123456789012:event-bus/shop"
	ownKey       = "arn:aws:kms:us-east-1:123456789012:key/0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
	ownRoutes    = "billing=https://sqs.us-east-1.amazonaws.com/123456789012/billing," +
		"ledger.fifo=https://sqs.us-east-1.amazonaws.com/123456789012/ledger.fifo," +
		"alerts=arn:aws:sns:us-east-1:123456789012:alerts," +
		"shop=arn:aws:events:us-east-1:123456789012:event-bus/shop?source=shop&detail-type=ShopEvent"
)

// exampleGrants are the grants on the example targets, as placeholders.
var exampleGrants = []grant{
	{"sqs:SendMessage", "${EventsQueue.Arn}"}, {"sqs:SendMessage", "${OrdersQueue.Arn}"},
	{"sns:Publish", "${NoticesTopic}"}, {"events:PutEvents", "${DomainBus.Arn}"},
}

// sendGrants are a role's send actions (and any wildcard action) on each
// of their resources.
func sendGrants(stmts []statement) []grant {
	var got []grant
	for _, s := range stmts {
		for _, a := range s.Action {
			if a == "*" || strings.HasSuffix(a, ":*") || slices.Contains(slices.Collect(maps.Values(sendActions)), a) {
				for _, r := range s.Resource {
					got = append(got, grant{a, r})
				}
			}
		}
	}
	return got
}

// TestTemplate_RolesMaySendToExactlyTheArnsGiven tries each list empty,
// with one ARN and with two, with and without the examples, on the
// template and on SAM's translation: each role holds each kind's send
// action on exactly the ARNs given plus the examples' when they are on,
// no statement at all for a kind with nothing to send to (IAM refuses an
// empty Resource, and an empty list parameter is [""]), and never an empty
// or wildcard resource.
func TestTemplate_RolesMaySendToExactlyTheArnsGiven(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                 string
		queues, topics, bus  string
		want                 []grant
		withExamplesAlsoWant []grant
	}{
		{name: "nothing given"},
		{name: "queues only", queues: ownQueue + "," + ownFifoQueue,
			want: []grant{{"sqs:SendMessage", ownQueue}, {"sqs:SendMessage", ownFifoQueue}}},
		{name: "one of each", queues: ownFifoQueue, topics: ownTopic, bus: ownBus,
			want: []grant{{"sqs:SendMessage", ownFifoQueue}, {"sns:Publish", ownTopic}, {"events:PutEvents", ownBus}}},
	} {
		for _, examples := range []bool{false, true} {
			overrides := map[string]string{"ExampleTargets": map[bool]string{true: "true", false: "false"}[examples],
				"Routes": ownRoutes, "QueueArns": tc.queues, "TopicArns": tc.topics, "BusArns": tc.bus}
			want := slices.Clone(tc.want)
			if examples {
				want = append(want, exampleGrants...)
			}
			for which, tpl := range map[string]*stack.Template{"template": load(t, overrides), "translation": translated(t, overrides)} {
				byRole := statements(t, tpl)
				for _, role := range []string{"SweepRole", "WakeRole"} {
					got := sendGrants(byRole[role])
					require.ElementsMatch(t, want, got, "%s, %s, examples %v: %s", which, tc.name, examples, role)
					for _, g := range got {
						require.NotEmpty(t, g.resource, "%s %s %s", which, tc.name, role)
						require.NotContains(t, g.resource, "*", "%s %s %s", which, tc.name, role)
					}
				}
				// A kind with nothing to send to has no policy at all.
				for policy, kind := range map[string]string{"SendMessagesPolicy": tc.queues, "PublishPolicy": tc.topics, "PutEventsPolicy": tc.bus} {
					_, exists := tpl.Resources[policy]
					require.Equal(t, examples || kind != "", exists, "%s, %s, examples %v: %s", which, tc.name, examples, policy)
				}
			}
		}
	}
}

// TestTemplate_WithoutExamplesTheStackHasNoTargetsAndNeedsRoutes: by
// default the stack creates no queue, topic or bus and lists no example
// output, and a deploy without Routes is refused by the template's rule
// (CloudFormation checks Rules before it creates anything; stack.Load
// does the same). The functions and the Routes output carry Routes as
// given, and the config loads from it.
func TestTemplate_WithoutExamplesTheStackHasNoTargetsAndNeedsRoutes(t *testing.T) {
	t.Parallel()
	require.Equal(t, "false", load(t, nil).Parameters["ExampleTargets"].Default)
	_, err := stack.Load(templatePath, nil)
	require.ErrorContains(t, err, "rule RoutesWithoutExamples: Routes is required when ExampleTargets is \"false\"")
	_, err = stack.Parse(translatedRaw(t), map[string]string{"ExampleTargets": "false"})
	require.ErrorContains(t, err, "Routes is required", "the translation keeps the rule")

	tpl, err := stack.Load(templatePath, map[string]string{"Routes": ownRoutes, "OrderedRoutes": "ledger.fifo",
		"QueueArns": ownQueue + "," + ownFifoQueue, "TopicArns": ownTopic, "BusArns": ownBus})
	require.NoError(t, err)
	for _, typ := range []string{"AWS::SQS::Queue", "AWS::SNS::Topic", "AWS::Events::EventBus", "AWS::SQS::QueuePolicy"} {
		require.Empty(t, tpl.OfType(typ), "no %s without ExampleTargets", typ)
	}
	for _, out := range []string{"OrdersQueueUrl", "EventsQueueUrl", "NoticesTopicArn", "DomainBusName", "DomainBusDLQUrl"} {
		require.NotContains(t, tpl.Outputs, out)
	}
	require.Equal(t, ownRoutes, asMap(tpl.Outputs["Routes"])["Value"])
	require.Equal(t, "ledger.fifo", asMap(tpl.Outputs["OrderedRoutes"])["Value"])
	require.Equal(t, "${OutboxTable}", asMap(tpl.Outputs["TableName"])["Value"])
	for _, fn := range functions {
		env := function(t, tpl, fn).Environment.Variables
		require.Equal(t, ownRoutes, env["OUTFLOW_ROUTES"], fn)
		env["OUTFLOW_TABLE"] = "outbox"
		_, err := config.Load(func(k string) string { return env[k] })
		require.NoError(t, err, fn)
	}
	// With the examples on and Routes given, Routes wins: the examples
	// exist (and may be sent to) but are not routed.
	both := load(t, map[string]string{"Routes": ownRoutes, "QueueArns": ownQueue})
	require.NotEmpty(t, both.OfType("AWS::SQS::Queue"))
	require.Equal(t, ownRoutes, function(t, both, "SweepFunction").Environment.Variables["OUTFLOW_ROUTES"])
	require.Equal(t, ownRoutes, asMap(both.Outputs["Routes"])["Value"])
}

// TestTemplate_RoutesOutputIsWhatTheFunctionsRunWith, with the examples'
// routes (ExampleTargets, no Routes) as with Routes given.
func TestTemplate_RoutesOutputIsWhatTheFunctionsRunWith(t *testing.T) {
	t.Parallel()
	for _, overrides := range []map[string]string{nil, {"Routes": ownRoutes}, {"ExampleTargets": "false", "Routes": ownRoutes}} {
		for which, tpl := range map[string]*stack.Template{"template": load(t, overrides), "translation": translated(t, overrides)} {
			routes := asMap(tpl.Outputs["Routes"])["Value"]
			require.NotEmpty(t, routes, which)
			for _, fn := range functions {
				// SAM's translation has merged Globals into each
				// AWS::Lambda::Function.
				var f struct {
					Environment struct{ Variables map[string]string }
				}
				require.NoError(t, tpl.Resources[fn].Decode(&f), "%s %s", which, fn)
				require.Equal(t, routes, f.Environment.Variables["OUTFLOW_ROUTES"], "%s %s %v", which, fn, overrides)
			}
		}
	}
}

// TestTemplate_TargetParametersRefuseWildcardsAndOtherServices: each list
// takes only ARNs of its own service, element by element, so no send
// statement can name "*" or another service's resource; Routes takes
// OUTFLOW_ROUTES' syntax without spaces.
func TestTemplate_TargetParametersRefuseWildcardsAndOtherServices(t *testing.T) {
	t.Parallel()
	params := load(t, nil).Parameters
	for _, tc := range []struct {
		param      string
		ok, refuse []string
	}{
		{"QueueArns", []string{"", ownQueue, ownQueue + "," + ownFifoQueue, "arn:aws-cn:sqs:cn-north-1:123456789012:q_1-2"},
			[]string{"*", "arn:aws:sqs:us-east-1:123456789012:*", "arn:aws:sqs:*:123456789012:q", ownTopic, "https://sqs.us-east-1.amazonaws.com/123456789012/billing", ownQueue + ", " + ownFifoQueue}},
		{"TopicArns", []string{"", ownTopic, ownTopic + ",arn:aws:sns:us-east-1:123456789012:t.fifo"},
			[]string{"*", "arn:aws:sns:us-east-1:123456789012:*", ownQueue, "alerts"}},
		{"BusArns", []string{"", ownBus, "arn:aws:events:us-east-1:123456789012:event-bus/default"},
			[]string{"*", "arn:aws:events:us-east-1:123456789012:event-bus/*", "arn:aws:events:us-east-1:123456789012:rule/r", "shop"}},
		{"TargetKmsKeyArns", []string{"", ownKey, ownKey + "," + testKey},
			[]string{"*", "arn:aws:kms:us-east-1:123456789012:key/*", "arn:aws:kms:us-east-1:123456789012:alias/x", "alias/aws/sqs"}},
		{"Routes", []string{"", ownRoutes, "orders=https://sqs.us-east-1.amazonaws.com/1/orders"},
			[]string{"orders", "orders=", "=x", "orders=a b", "orders=a,", " orders=a", "orders=a, b=c"}},
	} {
		p := params[tc.param]
		for _, v := range tc.ok {
			require.NoError(t, p.Allows(v), "%s %q", tc.param, v)
		}
		for _, v := range tc.refuse {
			require.Error(t, p.Allows(v), "%s %q", tc.param, v)
		}
	}
}

// TestTemplate_TargetKmsKeyArnsGrantsOnlyThoseKeysThroughSqsAndSns: the
// routed queues' and topics' keys, for the two actions SQS and SNS need of
// the sender, only through those services; no KMS statement without them.
func TestTemplate_TargetKmsKeyArnsGrantsOnlyThoseKeysThroughSqsAndSns(t *testing.T) {
	t.Parallel()
	none := statements(t, load(t, nil))
	for role, stmts := range none {
		for _, s := range stmts {
			require.False(t, slices.ContainsFunc(s.Action, func(a string) bool { return strings.HasPrefix(a, "kms:") }), role)
		}
	}
	tpl := load(t, map[string]string{"TargetKmsKeyArns": ownKey + "," + testKey})
	var p struct {
		Roles          []string
		PolicyDocument struct {
			Statement []struct {
				Action    []string
				Resource  []string
				Condition map[string]map[string][]string
			}
		}
	}
	resourceOf(t, tpl, "TargetKmsKeysPolicy", "AWS::IAM::Policy", &p)
	require.ElementsMatch(t, []string{"${SweepRole}", "${WakeRole}"}, p.Roles)
	require.Len(t, p.PolicyDocument.Statement, 1)
	s := p.PolicyDocument.Statement[0]
	require.ElementsMatch(t, keyActions, s.Action)
	require.Equal(t, []string{ownKey, testKey}, s.Resource)
	require.ElementsMatch(t, []string{"sqs.us-east-1.amazonaws.com", "sns.us-east-1.amazonaws.com"}, s.Condition["StringEquals"]["kms:ViaService"])
}

// TestTemplate_FunctionsStartWithTheSendPoliciesAttached: the send
// policies attach to the roles apart from them, so the functions wait for
// SendPoliciesAttached, whose Metadata refers to each policy exactly when
// it exists (a DependsOn on a policy whose condition is false is an
// error).
func TestTemplate_FunctionsStartWithTheSendPoliciesAttached(t *testing.T) {
	t.Parallel()
	raw := rawResources(t)
	require.Empty(t, raw["SendPoliciesAttached"].Condition)
	for _, fn := range functions {
		require.Contains(t, dependsOn(raw[fn].DependsOn), "SendPoliciesAttached", fn)
	}
	for _, tc := range []struct {
		overrides map[string]string
		want      map[string]any
	}{
		{map[string]string{"ExampleTargets": "false", "Routes": ownRoutes, "QueueArns": ownQueue}, map[string]any{"Queues": "${SendMessagesPolicy}"}},
		{map[string]string{"TargetKmsKeyArns": ownKey}, map[string]any{"Queues": "${SendMessagesPolicy}", "Topics": "${PublishPolicy}", "Buses": "${PutEventsPolicy}", "Keys": "${TargetKmsKeysPolicy}"}},
	} {
		for which, tpl := range map[string]*stack.Template{"template": load(t, tc.overrides), "translation": translated(t, tc.overrides)} {
			require.Equal(t, tc.want, tpl.Resources["SendPoliciesAttached"].Metadata, "%s %v", which, tc.overrides)
		}
	}
}

// TestTemplate_HeadWaitAndMetricsNamespaceAreParameters: both variables
// come from their parameters, and the alarms and the dashboard read the
// namespace the functions write.
func TestTemplate_HeadWaitAndMetricsNamespaceAreParameters(t *testing.T) {
	t.Parallel()
	tpl := load(t, map[string]string{"HeadWaitMs": "750", "MetricsNamespace": "Shop/Outbox"})
	for _, fn := range functions {
		env := function(t, tpl, fn).Environment.Variables
		require.Equal(t, "750ms", env["OUTFLOW_HEAD_WAIT"], fn)
		require.Equal(t, "Shop/Outbox", env["OUTFLOW_METRICS_NAMESPACE"], fn)
	}
	ours := 0
	for _, name := range tpl.OfType("AWS::CloudWatch::Alarm") {
		a := alarm(t, tpl, name)
		for _, w := range a.watched() {
			require.NotEqual(t, "Outflow", w.Namespace, name)
			if w.Namespace == "Shop/Outbox" {
				ours++
			}
		}
	}
	require.Positive(t, ours, "some alarms watch Outflow's own metrics")
	var dash struct{ DashboardBody string }
	resourceOf(t, tpl, "Dashboard", "AWS::CloudWatch::Dashboard", &dash)
	require.Contains(t, dash.DashboardBody, `["Shop/Outbox", `)
	require.NotContains(t, dash.DashboardBody, `["Outflow", `)
	require.Error(t, tpl.Parameters["HeadWaitMs"].Allows("60001"), "OUTFLOW_HEAD_WAIT is at most 1m")
	require.Error(t, tpl.Parameters["MetricsNamespace"].Allows(""))
}

// TestDeployedStack_ToYourOwnTargets creates a standard and a FIFO queue,
// a topic and a bus first, as an adopter's own, and deploys the stack
// without the examples, passing them in. Read back through the services'
// APIs: no example target is created, both roles may send to exactly
// those ARNs (a list left empty, TopicArns given as "" and BusArns left
// out, gives no statement), the functions run with Routes, and the outputs
// give producers the table, the routes and the ordered routes.
//
// Partly circular: moto's CloudFormation attaches the AWS::IAM::Policy
// resources as the roles' inline policies as given, and IAM on the moto
// server does not check that the ARNs exist; the template-level tests
// (TestTemplate_RolesMaySendToExactlyTheArnsGiven) are the authority on
// the grants, and this shows the template's lists and conditions resolve
// to them when CloudFormation, not stack.Load, resolves them.
func TestDeployedStack_ToYourOwnTargets(t *testing.T) {
	t.Parallel()
	queue := awstest.NewQueue(t, false)
	fifo := awstest.NewQueue(t, true)
	topic := awstest.NewTopic(t, false)
	_, bus := awstest.NewBus(t)
	queueArn, fifoArn := awstest.QueueARN(t, queue), awstest.QueueARN(t, fifo)
	routes := strings.Join([]string{"own=" + queue, "own.fifo=" + fifo, "alerts=" + topic, "shop=" + bus + "?source=shop&detail-type=ShopEvent"}, ",")

	for _, tc := range []struct {
		name   string
		params map[string]string
		want   []grant
	}{
		{"every kind", map[string]string{"QueueArns": queueArn + "," + fifoArn, "TopicArns": topic, "BusArns": bus},
			[]grant{{"sqs:SendMessage", queueArn}, {"sqs:SendMessage", fifoArn}, {"sns:Publish", topic}, {"events:PutEvents", bus}}},
		{"queues only", map[string]string{"QueueArns": queueArn + "," + fifoArn, "TopicArns": ""},
			[]grant{{"sqs:SendMessage", queueArn}, {"sqs:SendMessage", fifoArn}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			params := map[string]string{"ExampleTargets": "false", "Routes": routes, "OrderedRoutes": "own.fifo=skip"}
			maps.Copy(params, tc.params)
			d := deployWith(t, params)
			for _, logical := range []string{"OrdersQueue", "OrdersDLQ", "EventsQueue", "EventsDLQ", "NoticesTopic", "DomainBus"} {
				require.NotContains(t, d.ids, logical, "no example targets")
			}
			for _, role := range []string{"SweepRole", "WakeRole"} {
				require.ElementsMatch(t, tc.want, sendGrants(d.roleStatements(t, role)), role)
			}
			lam := lambda.NewFromConfig(d.cfg)
			for _, fn := range d.tpl.OfType("AWS::Lambda::Function") {
				out, err := lam.GetFunction(context.Background(), &lambda.GetFunctionInput{FunctionName: aws.String(d.ids[fn])})
				require.NoError(t, err, fn)
				require.Equal(t, routes, out.Configuration.Environment.Variables["OUTFLOW_ROUTES"], fn)
				require.Equal(t, "own.fifo=skip", out.Configuration.Environment.Variables["OUTFLOW_ORDERED"], fn)
			}
			require.Equal(t, map[string]string{
				"TableName": d.ids["OutboxTable"], "Routes": routes, "OrderedRoutes": "own.fifo=skip",
			}, d.producerOutputs(t))
		})
	}
}

// TestDeployedStack_ExamplesBesideYourOwnTargets deploys the examples
// with an own queue given as well: the roles may send to both, through
// the template's Join and Split of the two lists, and the functions route
// to the examples (no Routes).
func TestDeployedStack_ExamplesBesideYourOwnTargets(t *testing.T) {
	t.Parallel()
	queueArn := awstest.QueueARN(t, awstest.NewQueue(t, false))
	// deployParameters, so checkFunctions finds each setting wired.
	params := map[string]string{"QueueArns": queueArn}
	maps.Copy(params, deployParameters)
	d := deployWith(t, params)
	want := []grant{{"sqs:SendMessage", queueArn}}
	for _, g := range exampleGrants {
		want = append(want, grant{g.action, d.sub(t, g.resource)})
	}
	for _, role := range []string{"SweepRole", "WakeRole"} {
		require.ElementsMatch(t, want, sendGrants(d.roleStatements(t, role)), role)
	}
	t.Run("functions", d.checkFunctions)
	out := d.producerOutputs(t)
	require.Equal(t, d.sub(t, asMap(d.tpl.Outputs["Routes"])["Value"].(string)), out["Routes"])
	require.Contains(t, out["Routes"], "orders="+d.ids["OrdersQueue"])
}

// producerOutputs are the deployed stack's outputs producers read.
func (d *deployment) producerOutputs(t *testing.T) map[string]string {
	t.Helper()
	out, err := cloudformation.NewFromConfig(d.cfg).DescribeStacks(context.Background(), &cloudformation.DescribeStacksInput{StackName: aws.String(d.name)})
	require.NoError(t, err)
	require.Len(t, out.Stacks, 1)
	got := map[string]string{}
	for _, o := range out.Stacks[0].Outputs {
		if k := aws.ToString(o.OutputKey); k == "TableName" || k == "Routes" || k == "OrderedRoutes" {
			got[k] = aws.ToString(o.OutputValue)
		}
	}
	return got
}
