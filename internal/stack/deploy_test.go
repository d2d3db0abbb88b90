package stack_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cftypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwschemas "github.com/aws/aws-sdk-go-v2/service/cloudwatch/schemas"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/transport/http/protocol/awsquery"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/stack"
)

// deployParameters are the parameters the test stack is created with.
// Each differs from its default and from the others of its kind, so a
// template that wires the wrong parameter to a setting fails the checks
// against the parameter (wiredTo); a sweep reservation and an alarm topic
// turn on the properties they switch.
var deployParameters = map[string]string{
	// The example queues, topic and bus, routed to: the checks below read
	// them back. own_targets_test.go deploys without them.
	"ExampleTargets":              "true",
	"SweepReservedConcurrency":    "5",
	"AlarmTopicArn":               "arn:aws:sns:us-east-1:000000000000:outflow-alarms",
	"SweepRate":                   "rate(2 minutes)",
	"SweepMemoryMB":               "512",
	"WakeMemoryMB":                "384",
	"SweepTimeoutSeconds":         "90",
	"WakeTimeoutSeconds":          "20",
	"WakeBatchSize":               "50",
	"WakeBatchWindowSeconds":      "1",
	"WakeParallelizationFactor":   "2",
	"WakeMaxRetryAttempts":        "3",
	"WakeMaxRecordAgeSeconds":     "120",
	"BacklogAlarmThresholdMs":     "250000",
	"IteratorAgeAlarmThresholdMs": "30000",
	"NoSweepAlarmPeriodSeconds":   "600",
	"BlockedGroupAlarmMinutes":    "20",
	// Partitioned: the sweep's role may invoke the sweep.
	"SweepPartitions": "3",
}

// wiredTo names, for a resource's settings, the parameter each comes from,
// as docs/configuration.md's parameter table documents them.
var wiredTo = map[string]map[string]string{
	"SweepFunction":          {"MemorySize": "SweepMemoryMB", "Timeout": "SweepTimeoutSeconds", "ReservedConcurrentExecutions": "SweepReservedConcurrency"},
	"WakeFunction":           {"MemorySize": "WakeMemoryMB", "Timeout": "WakeTimeoutSeconds"},
	"WakeFunctionStream":     {"BatchSize": "WakeBatchSize", "MaximumBatchingWindowInSeconds": "WakeBatchWindowSeconds", "ParallelizationFactor": "WakeParallelizationFactor", "MaximumRetryAttempts": "WakeMaxRetryAttempts", "MaximumRecordAgeInSeconds": "WakeMaxRecordAgeSeconds"},
	"SweepFunctionSchedule":  {"ScheduleExpression": "SweepRate"},
	"BacklogAlarm":           {"Threshold": "BacklogAlarmThresholdMs"},
	"StreamIteratorAgeAlarm": {"Threshold": "IteratorAgeAlarmThresholdMs"},
	"BlockedGroupAlarm":      {"Threshold": "BlockedGroupAlarmMinutes"},
	"NoSweepAlarm":           {"Period": "NoSweepAlarmPeriodSeconds"},
}

// requireWired checks a deployed setting against the parameter wiredTo
// names for it, if any.
func (d *deployment) requireWired(t *testing.T, logical, setting string, got any) {
	t.Helper()
	d.wired[logical+"."+setting] = true
	param, ok := wiredTo[logical][setting]
	if !ok {
		return
	}
	want, ok := deployParameters[param]
	require.True(t, ok, "%s is deployed with a value of its own", param)
	if f, isFloat := got.(float64); isFloat {
		got = strconv.FormatFloat(f, 'f', -1, 64)
	}
	require.Equal(t, want, fmt.Sprint(got), "%s %s is the %s parameter", logical, setting, param)
}

// deployment is a CloudFormation stack created from SAM's translation of
// template.yaml on the test endpoint.
type deployment struct {
	cfg  aws.Config
	name string
	// tpl is the translation as sent, resolved with deployParameters: what
	// each deployed resource is compared against.
	tpl *stack.Template
	// raw is the translation as sent, for what resolving drops (policies).
	raw map[string]any
	// ids maps each logical ID to its physical ID (what Ref returns).
	ids map[string]string
	// values fills the template's ${Name} and ${Name.Attr} placeholders
	// with what the deployment made of them.
	values map[string]string
	// wired records each setting checked against its parameter.
	wired map[string]bool
	// bucket holds the functions' code.
	bucket string
}

// notInMoto are the resource types the moto server's CloudFormation skips
// (it warns and creates nothing), with what that leaves untested.
var notInMoto = map[string]string{
	// The bus's dead-letter queue policy (KmsKeyArn only): bus_test.go
	// checks the template's.
	"AWS::SQS::QueuePolicy": "the queue policy is not deployed",
	// KmsKeyPolicyAttached only orders the functions after the key's grant
	// (moto ignores the type, as it creates nothing): kms_test.go checks
	// the order on the template and the translation.
	"AWS::CloudFormation::WaitConditionHandle": "the handle is not deployed",
}

// deploy creates the stack with deployParameters and waits until it is
// complete. Lambda code comes from a small zip in a bucket of the test's
// own, in place of the translation's placeholder location; nothing runs
// it.
func deploy(t *testing.T) *deployment {
	t.Helper()
	return deployWith(t, deployParameters)
}

// deployWith is deploy with the given parameters.
func deployWith(t *testing.T, parameters map[string]string) *deployment {
	t.Helper()
	return deployTranslation(t, translatedRaw(t), parameters)
}

// deployTranslation creates a stack from translation, a SAM translation
// (template.yaml's, or an older template's), with the given parameters,
// and waits until it is complete.
func deployTranslation(t *testing.T, translation []byte, parameters map[string]string) *deployment {
	t.Helper()
	ctx := context.Background()
	d := &deployment{cfg: awstest.TestConfig(t), name: awstest.UniqueName("outflow-deploy"), wired: map[string]bool{}}
	d.bucket = awstest.UniqueName("outflow-code")
	s3c := s3.NewFromConfig(d.cfg, func(o *s3.Options) { o.UsePathStyle = true })
	_, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(d.bucket)})
	require.NoError(t, err)
	body := d.use(t, translation, parameters)
	var keys []string
	for _, key := range d.codeKeys() {
		_, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(d.bucket), Key: aws.String(key), Body: bytes.NewReader(bootstrapZip(t))})
		require.NoError(t, err)
		keys = append(keys, key)
	}
	require.Len(t, keys, 2, "both functions' code")
	t.Cleanup(func() {
		for _, k := range keys {
			_, _ = s3c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(d.bucket), Key: aws.String(k)})
		}
		_, _ = s3c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(d.bucket)})
	})

	cf := cloudformation.NewFromConfig(d.cfg)
	_, err = cf.CreateStack(ctx, &cloudformation.CreateStackInput{
		StackName:    aws.String(d.name),
		TemplateBody: aws.String(body),
		Parameters:   cfParameters(parameters),
		// What sam deploy passes: the roles have generated names.
		Capabilities: []cftypes.Capability{cftypes.CapabilityCapabilityIam},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = cf.DeleteStack(ctx, &cloudformation.DeleteStackInput{StackName: aws.String(d.name)}) })
	waiter := cloudformation.NewStackCreateCompleteWaiter(cf, func(o *cloudformation.StackCreateCompleteWaiterOptions) {
		o.MinDelay, o.MaxDelay = 200*time.Millisecond, 2*time.Second
	})
	if err := waiter.Wait(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(d.name)}, 2*time.Minute); err != nil {
		require.NoError(t, err, "stack %s: %s", d.name, failures(ctx, cf, d.name))
	}
	d.readBack(t)
	return d
}

// use makes translation, resolved with parameters, the template the
// deployment is compared against, points each function's code at the
// deployment's bucket, and returns the template body to send.
func (d *deployment) use(t *testing.T, translation []byte, parameters map[string]string) string {
	t.Helper()
	tpl, err := stack.Parse(translation, parameters)
	require.NoError(t, err)
	d.tpl, d.raw = tpl, nil
	require.NoError(t, json.Unmarshal(translation, &d.raw))
	for name := range d.codeKeys() {
		asMap(asMap(asMap(asMap(d.raw["Resources"])[name])["Properties"])["Code"])["S3Bucket"] = d.bucket
	}
	body, err := json.Marshal(d.raw)
	require.NoError(t, err)
	return string(body)
}

// codeKeys are the S3 keys of the functions' code in the translation, by
// logical ID: the translation's placeholder locations.
func (d *deployment) codeKeys() map[string]string {
	keys := map[string]string{}
	for name, r := range asMap(d.raw["Resources"]) {
		if asMap(r)["Type"] == "AWS::Lambda::Function" {
			keys[name] = fmt.Sprint(asMap(asMap(asMap(r)["Properties"])["Code"])["S3Key"])
		}
	}
	return keys
}

func cfParameters(parameters map[string]string) []cftypes.Parameter {
	var params []cftypes.Parameter
	for k, v := range parameters {
		params = append(params, cftypes.Parameter{ParameterKey: aws.String(k), ParameterValue: aws.String(v)})
	}
	return params
}

// update updates the stack to translation with the given parameters and
// waits until the update is complete; an update CloudFormation refuses is
// returned as the error, with each failed resource's reason.
func (d *deployment) update(t *testing.T, translation []byte, parameters map[string]string) error {
	t.Helper()
	ctx := context.Background()
	body := d.use(t, translation, parameters)
	cf := cloudformation.NewFromConfig(d.cfg)
	_, err := cf.UpdateStack(ctx, &cloudformation.UpdateStackInput{
		StackName:    aws.String(d.name),
		TemplateBody: aws.String(body),
		Parameters:   cfParameters(parameters),
		Capabilities: []cftypes.Capability{cftypes.CapabilityCapabilityIam},
	})
	if err != nil {
		return fmt.Errorf("update stack %s: %w", d.name, err)
	}
	waiter := cloudformation.NewStackUpdateCompleteWaiter(cf, func(o *cloudformation.StackUpdateCompleteWaiterOptions) {
		o.MinDelay, o.MaxDelay = 200*time.Millisecond, 2*time.Second
	})
	if err := waiter.Wait(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(d.name)}, 2*time.Minute); err != nil {
		return fmt.Errorf("stack %s: %w: %s", d.name, err, failures(ctx, cf, d.name))
	}
	d.readBack(t)
	return nil
}

// readBack reads the stack's resources: their physical IDs, every one of
// the template's deployed, and the values its placeholders stand for.
func (d *deployment) readBack(t *testing.T) {
	t.Helper()
	cf := cloudformation.NewFromConfig(d.cfg)
	res, err := cf.DescribeStackResources(context.Background(), &cloudformation.DescribeStackResourcesInput{StackName: aws.String(d.name)})
	require.NoError(t, err)
	d.ids = map[string]string{}
	for _, r := range res.StackResources {
		d.ids[aws.ToString(r.LogicalResourceId)] = aws.ToString(r.PhysicalResourceId)
	}
	d.busIDs(t)
	var missing []string
	for name, r := range d.tpl.Resources {
		if _, skipped := notInMoto[r.Type]; d.ids[name] == "" && !skipped {
			missing = append(missing, name)
		}
	}
	require.Empty(t, missing, "every resource of the translation is deployed")
	d.values = d.attributes(t)
}

// busIDs fills in the physical ID (the name, which Ref returns) of each
// event bus the stack lists without one: moto's CloudFormation creates the
// bus but records no physical ID for it. The bus is found by the name the
// template gives it, with the deployment's stack name.
func (d *deployment) busIDs(t *testing.T) {
	t.Helper()
	buses, err := d.tpl.EventBuses()
	require.NoError(t, err)
	for name, b := range buses {
		if d.ids[name] != "" {
			continue
		}
		want := d.name + strings.TrimPrefix(b.Name, stack.StackName)
		out, err := eventbridge.NewFromConfig(d.cfg).DescribeEventBus(context.Background(), &eventbridge.DescribeEventBusInput{Name: aws.String(want)})
		require.NoError(t, err, "%s: the bus %s", name, want)
		d.ids[name] = aws.ToString(out.Name)
	}
}

// failures is each failed resource's reason, for a stack that did not
// complete.
func failures(ctx context.Context, cf *cloudformation.Client, name string) string {
	out, err := cf.DescribeStackEvents(ctx, &cloudformation.DescribeStackEventsInput{StackName: aws.String(name)})
	if err != nil {
		return err.Error()
	}
	var reasons []string
	for _, e := range out.StackEvents {
		if strings.HasSuffix(string(e.ResourceStatus), "FAILED") {
			reasons = append(reasons, aws.ToString(e.LogicalResourceId)+": "+aws.ToString(e.ResourceStatusReason))
		}
	}
	return strings.Join(reasons, "; ")
}

// attributes reads, through each service's API, every value the template
// refers to: Refs are the physical IDs, GetAtt Arn and StreamArn are read
// back from the resources.
func (d *deployment) attributes(t *testing.T) map[string]string {
	t.Helper()
	ctx := context.Background()
	values := map[string]string{}
	for name, id := range d.ids {
		values[name] = id
	}
	ddb, sqsc := awstest.DynamoDB(t), awstest.SQS(t)
	lam, cw := lambda.NewFromConfig(d.cfg), cloudWatch(d.cfg)
	for name, r := range d.tpl.Resources {
		id := d.ids[name]
		switch r.Type {
		case "AWS::DynamoDB::Table":
			out, err := ddb.DescribeTable(ctx, describeTable(id))
			require.NoError(t, err, name)
			values[name+".Arn"] = aws.ToString(out.Table.TableArn)
			values[name+".StreamArn"] = aws.ToString(out.Table.LatestStreamArn)
		case "AWS::SQS::Queue":
			arn := queueAttributes(t, sqsc, id)["QueueArn"]
			values[name+".Arn"] = arn
			values[name+".QueueName"] = arn[strings.LastIndex(arn, ":")+1:]
		case "AWS::SNS::Topic":
			// Ref is the topic's ARN.
			values[name+".TopicArn"] = id
			values[name+".TopicName"] = id[strings.LastIndex(id, ":")+1:]
		case "AWS::Events::EventBus":
			// Ref is the bus's name.
			out, err := eventbridge.NewFromConfig(d.cfg).DescribeEventBus(ctx, &eventbridge.DescribeEventBusInput{Name: aws.String(id)})
			require.NoError(t, err, name)
			values[name+".Arn"] = aws.ToString(out.Arn)
			values[name+".Name"] = aws.ToString(out.Name)
		case "AWS::Lambda::Function":
			out, err := lam.GetFunction(ctx, &lambda.GetFunctionInput{FunctionName: aws.String(id)})
			require.NoError(t, err, name)
			values[name+".Arn"] = aws.ToString(out.Configuration.FunctionArn)
		case "AWS::CloudWatch::Alarm":
			out, err := cw.DescribeAlarms(ctx, &cloudwatch.DescribeAlarmsInput{AlarmNames: []string{id}})
			require.NoError(t, err, name)
			require.Len(t, out.MetricAlarms, 1, name)
			values[name+".Arn"] = aws.ToString(out.MetricAlarms[0].AlarmArn)
		}
	}
	return values
}

// sub fills the placeholders of a template value with the deployment's
// values.
func (d *deployment) sub(t *testing.T, s string) string {
	t.Helper()
	out, err := stack.Substitute(s, d.values)
	require.NoError(t, err)
	return out
}

// logical is the resource a "${Name}" or "${Name.Attr}" placeholder names.
func logical(placeholder string) string {
	name, _, _ := strings.Cut(strings.TrimSuffix(strings.TrimPrefix(placeholder, "${"), "}"), ".")
	return name
}

// bootstrapZip is a function package that is never run: the deployment
// stores it, as Lambda does.
func bootstrapZip(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, err := zw.Create("bootstrap")
	require.NoError(t, err)
	_, err = w.Write([]byte("#!/bin/sh\n"))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

// cloudWatch is a CloudWatch client that speaks the Query protocol:
// CloudWatch serves it as well as the SDK's default (CBOR), which the moto
// server does not route.
func cloudWatch(cfg aws.Config) *cloudwatch.Client {
	return cloudwatch.NewFromConfig(cfg, func(o *cloudwatch.Options) {
		o.Protocol = awsquery.New(cwschemas.GraniteServiceVersion20100801)
	})
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// TestDeployedStack_IsWhatTheTemplateSays creates the stack SAM's
// translation describes and reads every resource back through its
// service's API: the table against the Go schema, the rest against the
// translation's values for the same parameters.
func TestDeployedStack_IsWhatTheTemplateSays(t *testing.T) {
	t.Parallel()
	d := deploy(t)
	t.Run("table", d.checkTable)
	t.Run("queues", d.checkQueues)
	t.Run("topic and bus", d.checkTargets)
	t.Run("roles send only to the routed targets", d.checkSendGrants)
	t.Run("functions", d.checkFunctions)
	t.Run("stream mapping", d.checkMapping)
	t.Run("schedule", d.checkSchedule)
	t.Run("sweep partitions", d.checkSweepPartitions)
	t.Run("alarms", d.checkAlarms)
	t.Run("dashboard", d.checkDashboard)
	t.Run("every wired setting was checked", func(t *testing.T) {
		for logical, settings := range wiredTo {
			for setting := range settings {
				require.True(t, d.wired[logical+"."+setting], "%s %s", logical, setting)
			}
		}
	})
	// Last: it deletes the stack.
	t.Run("deleting the stack keeps the table", d.checkRetain)
}

// TestDeployedStack_WithAKeyHasTheBusDeadLetterQueueAndItsAlarm creates
// the stack with KmsKeyArn: it deploys, and the bus's dead-letter queue
// (SSE-SQS, 14 days), its alarm on the deployed queue's name (missing data
// ignored) and the dashboard listing that alarm are as the template says,
// and the queue outlives the stack. The moto server's CloudFormation
// creates a bus from its name alone (no KmsKeyIdentifier, no
// DeadLetterConfig) and skips the queue policy, so those are checked on
// the template only (bus_test.go). The table is deployed here without
// deletion protection, the other value of TableDeletionProtection.
func TestDeployedStack_WithAKeyHasTheBusDeadLetterQueueAndItsAlarm(t *testing.T) {
	t.Parallel()
	parameters := map[string]string{"KmsKeyArn": testKey, "TableDeletionProtection": "false"}
	for k, v := range deployParameters {
		parameters[k] = v
	}
	d := deployWith(t, parameters)
	require.Contains(t, d.tpl.Resources, "DomainBusDLQ")
	require.Contains(t, d.tpl.Resources, "DomainBusDeadLettersAlarm")
	require.NotEmpty(t, d.ids["DomainBusDLQ"], "the bus's dead-letter queue is deployed")
	t.Run("table", d.checkTable)
	t.Run("queues", d.checkQueues)
	t.Run("alarms", d.checkAlarms)
	t.Run("dashboard", d.checkDashboard)
	// Last: it deletes the stack.
	t.Run("deleting the stack keeps the table and the bus's dead letters", d.checkRetain)
}
