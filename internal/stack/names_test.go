package stack_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTranslation_HasNoFixedPhysicalNames(t *testing.T) {
	t.Parallel()
	var doc struct {
		Resources map[string]struct {
			Type       string
			Properties map[string]any
		}
	}
	require.NoError(t, json.Unmarshal(translatedRaw(t), &doc))
	// The property that names each resource type the stack has, with its
	// length limit; "" for types that have no name of their own.
	nameProp := map[string]string{
		"AWS::Lambda::Function": "FunctionName", "AWS::Scheduler::Schedule": "Name", "AWS::Logs::LogGroup": "LogGroupName",
		"AWS::CloudWatch::Dashboard": "DashboardName", "AWS::CloudWatch::Alarm": "AlarmName", "AWS::IAM::Role": "RoleName",
		"AWS::SQS::Queue": "QueueName", "AWS::DynamoDB::Table": "TableName",
		"AWS::SNS::Topic": "TopicName", "AWS::Events::EventBus": "Name",
		"AWS::Lambda::EventSourceMapping": "", "AWS::Lambda::EventInvokeConfig": "",
		// A queue's policy is attached to the queue; it has no name.
		"AWS::SQS::QueuePolicy": "",
		// An inline policy: its PolicyName is scoped to the stack's own roles.
		"AWS::IAM::Policy": "",
		// KmsKeyPolicyAttached only orders the functions; it has no name.
		"AWS::CloudFormation::WaitConditionHandle": "",
	}
	// Each type's name length limit (a schedule's Name and a bus's differ).
	limit := map[string]int{
		"AWS::Lambda::Function": 64, "AWS::Scheduler::Schedule": 64, "AWS::Logs::LogGroup": 512,
		"AWS::CloudWatch::Dashboard": 255, "AWS::CloudWatch::Alarm": 255, "AWS::IAM::Role": 64,
		"AWS::SQS::Queue": 80, "AWS::DynamoDB::Table": 255, "AWS::SNS::Topic": 256, "AWS::Events::EventBus": 256,
	}
	// The longest stack name CloudFormation accepts, and a long region.
	longStack, longRegion := "s"+strings.Repeat("x", 127), "ap-southeast-99"
	for logical, r := range doc.Resources {
		prop, known := nameProp[r.Type]
		require.True(t, known, "%s: new resource type %s; add whether it has a physical name", logical, r.Type)
		if prop == "" || r.Properties[prop] == nil {
			continue
		}
		// A stack-scoped name is a !Sub on the stack name; anything else
		// (a plain string, another intrinsic) is a fixed name.
		sub, isMap := r.Properties[prop].(map[string]any)
		require.True(t, isMap, "%s: %s %v is fixed; two stacks in one account and region would collide", logical, prop, r.Properties[prop])
		tmpl, isSub := sub["Fn::Sub"].(string)
		require.True(t, isSub, "%s: %s %v is not a !Sub of the stack name", logical, prop, r.Properties[prop])
		require.Contains(t, tmpl, "${AWS::StackName}", "%s: %s %v is fixed; two stacks in one account and region would collide", logical, prop, r.Properties[prop])
		name := strings.NewReplacer("${AWS::StackName}", longStack, "${AWS::Region}", longRegion).Replace(tmpl)
		require.NotContains(t, name, "${", logical)
		require.LessOrEqual(t, len(name), limit[r.Type], "%s: %s too long for a %d-character stack name", logical, prop, len(longStack))
	}
	for logical, r := range doc.Resources {
		if r.Type == "AWS::Scheduler::Schedule" || r.Type == "AWS::Lambda::Function" {
			require.Nil(t, r.Properties[nameProp[r.Type]], "%s: CloudFormation names it", logical)
		}
	}
}
