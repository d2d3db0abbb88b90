package stack_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/stack"
)

// listTemplate has a CommaDelimitedList, a rule on it and a value built
// with Join and Split, as template.yaml's send policies are.
const listTemplate = `
Parameters:
  Arns: {Type: CommaDelimitedList, Default: "", AllowedPattern: "^(|arn:[a-z]+)$"}
  Need: {Type: String, AllowedValues: ["true", "false"], Default: "false"}
Conditions:
  HasArns: !Not [!Equals [!Join ["", !Ref Arns], ""]]
Rules:
  ArnsWhenNeeded:
    RuleCondition: !Equals [!Ref Need, "true"]
    Assertions:
      - Assert: !Condition HasArns
        AssertDescription: Arns is required
Resources:
  R:
    Type: Test
    Properties:
      List: !Ref Arns
      Joined: !Split [",", !Join [",", [!Join [",", !Ref Arns], !GetAtt X.Arn]]]
`

// TestParse_ListsRulesAndSplitAsCloudFormation: an empty list is [""]
// (what IAM would refuse as a resource), a list's pattern holds for each
// element, Split undoes Join, and a rule whose condition holds refuses a
// value its assertion does not allow, with its description.
func TestParse_ListsRulesAndSplitAsCloudFormation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		arns, need string
		list, join []any
		hasArns    bool
		err        string
	}{
		{arns: "", need: "false", list: []any{""}, join: []any{"", "${X.Arn}"}},
		{arns: "arn:a", need: "true", list: []any{"arn:a"}, join: []any{"arn:a", "${X.Arn}"}, hasArns: true},
		{arns: "arn:a,arn:b", need: "false", list: []any{"arn:a", "arn:b"}, join: []any{"arn:a", "arn:b", "${X.Arn}"}, hasArns: true},
		{arns: "", need: "true", err: "rule ArnsWhenNeeded: Arns is required"},
		{arns: "arn:a,*", need: "false", err: `"*" does not match AllowedPattern`},
	} {
		tpl, err := stack.Parse([]byte(listTemplate), map[string]string{"Arns": tc.arns, "Need": tc.need})
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err, tc.arns)
			continue
		}
		require.NoError(t, err, tc.arns)
		require.Equal(t, tc.hasArns, tpl.Conditions["HasArns"], tc.arns)
		require.Equal(t, tc.list, tpl.Resources["R"].Properties["List"], tc.arns)
		require.Equal(t, tc.join, tpl.Resources["R"].Properties["Joined"], tc.arns)
	}
}
