package stack_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/stack"
)

// testKey is a customer managed key's ARN, as an operator passes KmsKeyArn.
const testKey = "arn:aws:kms:us-east-1:000000000000:key/1234abcd-12ab-34cd-56ef-1234567890ab"

// keyActions are the KMS actions each role needs on the customer key: the
// table, its stream and SQS's data keys need Decrypt, and SQS encrypts each
// message it accepts under a data key from GenerateDataKey.
var keyActions = []string{"kms:Decrypt", "kms:GenerateDataKey"}

// TestTemplate_KmsKeyArnPutsEveryStoreUnderTheKey loads the template and
// its SAM translation with and without KmsKeyArn: with it, the table (and
// so its stream), every queue, topic, event bus and log group use exactly
// that key; without it none names a customer key and each keeps its AWS
// managed (or, for a bus, AWS owned) encryption.
func TestTemplate_KmsKeyArnPutsEveryStoreUnderTheKey(t *testing.T) {
	t.Parallel()
	for _, key := range []string{"", testKey} {
		overrides := map[string]string{"KmsKeyArn": key}
		for which, tpl := range map[string]*stack.Template{"template": load(t, overrides), "translation": translated(t, overrides)} {
			require.Equal(t, key != "", tpl.Conditions["HasKmsKey"], which)

			tables := tpl.OfType("AWS::DynamoDB::Table")
			require.NotEmpty(t, tables, which)
			for _, name := range tables {
				tb, err := tpl.Table(name)
				require.NoError(t, err, which)
				require.True(t, tb.SSESpecification.SSEEnabled, "%s %s: encrypted at rest", which, name)
				require.Equal(t, key, tb.SSESpecification.KMSMasterKeyId, "%s %s", which, name)
				require.Equal(t, map[bool]string{true: "KMS"}[key != ""], tb.SSESpecification.SSEType, "%s %s", which, name)
			}

			buses, err := tpl.EventBuses()
			require.NoError(t, err, which)
			require.NotEmpty(t, buses, which)
			// A bus's dead-letter queue holds what the key failed for, so
			// it must not need the key itself (bus_test.go checks it).
			busDLQs := map[string]bool{}
			for _, b := range buses {
				if b.DeadLetterConfig != nil {
					busDLQs[logical(b.DeadLetterConfig.Arn)] = true
				}
			}

			queues, err := tpl.Queues()
			require.NoError(t, err, which)
			require.NotEmpty(t, queues, which)
			for name, q := range queues {
				if busDLQs[name] {
					continue
				}
				require.Equal(t, key, q.KmsMasterKeyId, "%s %s", which, name)
				// SQS refuses SSE-SQS and a KMS key together.
				require.Equal(t, key == "", q.SqsManagedSseEnabled, "%s %s: SSE-SQS exactly when no key is given", which, name)
			}

			topics, err := tpl.Topics()
			require.NoError(t, err, which)
			require.NotEmpty(t, topics, which)
			for name, tp := range topics {
				// SNS has no encryption of its own unless asked: without a
				// key, its AWS managed one.
				want := map[bool]string{true: key, false: "alias/aws/sns"}[key != ""]
				require.Equal(t, want, tp.KmsMasterKeyId, "%s %s", which, name)
			}

			for name, b := range buses {
				require.Equal(t, key, b.KmsKeyIdentifier, "%s %s: the key, else EventBridge's AWS owned key", which, name)
			}

			groups := tpl.OfType("AWS::Logs::LogGroup")
			require.Len(t, groups, 2, which)
			for _, name := range groups {
				var lg struct{ KmsKeyId *string }
				require.NoError(t, tpl.Resources[name].Decode(&lg), name)
				if key == "" {
					require.Nil(t, lg.KmsKeyId, "%s %s: CloudWatch Logs' own encryption", which, name)
					continue
				}
				require.NotNil(t, lg.KmsKeyId, "%s %s", which, name)
				require.Equal(t, key, *lg.KmsKeyId, "%s %s", which, name)
			}
		}
	}
}

// TestTemplate_KmsKeyArnGrantsTheRolesOnlyTheKeyActions: with a key, each
// role gets exactly keyActions on exactly that key and nothing else
// changes; without one, no role holds any KMS action.
func TestTemplate_KmsKeyArnGrantsTheRolesOnlyTheKeyActions(t *testing.T) {
	t.Parallel()
	for which, get := range map[string]func(map[string]string) *stack.Template{
		"template":    func(o map[string]string) *stack.Template { return load(t, o) },
		"translation": func(o map[string]string) *stack.Template { return translated(t, o) },
	} {
		plain := statements(t, get(map[string]string{"KmsKeyArn": ""}))
		keyed := statements(t, get(map[string]string{"KmsKeyArn": testKey}))
		require.Contains(t, plain, "SweepRole", which)
		require.Contains(t, plain, "WakeRole", which)
		for role, stmts := range plain {
			for _, s := range stmts {
				for _, a := range s.Action {
					require.False(t, strings.HasPrefix(a, "kms:"), "%s %s: %s without KmsKeyArn", which, role, a)
				}
			}
		}
		for _, role := range []string{"SweepRole", "WakeRole"} {
			var kms, rest []statement
			for _, s := range keyed[role] {
				if slices.ContainsFunc(s.Action, func(a string) bool { return strings.HasPrefix(a, "kms:") }) {
					kms = append(kms, s)
				} else {
					rest = append(rest, s)
				}
			}
			require.Len(t, kms, 1, "%s %s: one KMS statement", which, role)
			require.Equal(t, "Allow", kms[0].Effect, "%s %s", which, role)
			require.ElementsMatch(t, keyActions, kms[0].Action, "%s %s", which, role)
			require.Equal(t, []string{testKey}, kms[0].Resource, "%s %s: the key itself, nothing wider", which, role)
			require.Equal(t, plain[role], rest, "%s %s: the key adds its statement and changes no other", which, role)
		}
	}
}

// TestTemplate_KmsKeyArnAcceptsOnlyKeyArns: CloudFormation refuses at
// deploy time anything the roles' statement could not name as its
// Resource: KMS authorizes against the key's ARN, so an alias or a bare key
// id would deploy roles that cannot use the key.
func TestTemplate_KmsKeyArnAcceptsOnlyKeyArns(t *testing.T) {
	t.Parallel()
	p := load(t, nil).Parameters["KmsKeyArn"]
	require.Equal(t, "", p.Default, "AWS managed encryption unless asked")
	for _, v := range []string{
		"", testKey,
		"arn:aws:kms:eu-west-1:123456789012:key/mrk-1234abcd12ab34cd56ef1234567890ab",
		"arn:aws-us-gov:kms:us-gov-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab",
		"arn:aws-cn:kms:cn-north-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab",
	} {
		require.NoError(t, p.Allows(v), "KmsKeyArn %q must be accepted", v)
	}
	for _, v := range []string{
		"1234abcd-12ab-34cd-56ef-1234567890ab", "alias/outflow",
		"arn:aws:kms:us-east-1:123456789012:alias/outflow",
		"arn:aws:kms:us-east-1:123456789012:key/*",
		"arn:aws:kms:us-east-1:12345678901:key/1234abcd",
		"arn:aws:sqs:us-east-1:123456789012:key/1234abcd",
		" " + testKey, testKey + " ", testKey + ",arn:aws:kms:us-east-1:123456789012:key/other",
	} {
		require.Error(t, p.Allows(v), "KmsKeyArn %q must be refused", v)
	}
}

// TestTemplate_FunctionEnvironmentsStayUnderLambdasKey: the environments
// hold only names and tuning, so KmsKeyArn does not move them to the
// customer key (a disabled key would then stop the functions' init too).
// template.yaml's checkov suppression of CKV_AWS_173 says so.
func TestTemplate_FunctionEnvironmentsStayUnderLambdasKey(t *testing.T) {
	t.Parallel()
	tpl := load(t, map[string]string{"KmsKeyArn": testKey})
	for _, name := range functions {
		require.NotContains(t, tpl.Resources[name].Properties, "KmsKeyArn", name)
	}
	require.Contains(t, string(templateText(t)), "KmsKeyArn leaves it so")
}
