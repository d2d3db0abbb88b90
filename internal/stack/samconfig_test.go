package stack_test

import (
	"encoding/json"
	"net/url"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/child"
	"github.com/outflowhq/outflow/internal/config"
	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/stack"
)

// samOverrides reads samconfig.toml.example's parameter_overrides with the
// SAM CLI's own parser, as `sam deploy` reads them.
const samOverrides = `
import json, sys, tomllib
from samcli.cli.types import CfnParameterOverridesType
with open(sys.argv[1], "rb") as f:
    c = tomllib.load(f)
po = c["default"]["deploy"]["parameters"]["parameter_overrides"]
json.dump(CfnParameterOverridesType().convert(po, None, None), sys.stdout)
`

// TestSamconfigExample_DeploysToItsOwnTargetsWithEveryRouteGranted: the
// example configuration parses as SAM parses it, the template accepts
// it (its rule included) without the examples, the functions' config
// loads from it, and every route's target is among the ARNs the roles
// are granted: the mistake a template cannot catch, caught here for the
// example an adopter copies.
func TestSamconfigExample_DeploysToItsOwnTargetsWithEveryRouteGranted(t *testing.T) {
	t.Parallel()
	python, ok := child.FindTool("OUTFLOW_PYTHON", ".venv/bin/python")
	require.True(t, ok, "no .venv/bin/python (make venv)")
	out, err := exec.Command(python, "-c", samOverrides, "../../samconfig.toml.example").CombinedOutput()
	require.NoError(t, err, "%s", out)
	var overrides map[string]string
	require.NoError(t, json.Unmarshal(out, &overrides))
	require.Contains(t, overrides, "Routes")
	require.NotContains(t, overrides, "ExampleTargets", "a first deploy goes to your own targets")

	tpl, err := stack.Load(templatePath, overrides)
	require.NoError(t, err)
	require.Empty(t, tpl.OfType("AWS::SQS::Queue"))
	env := function(t, tpl, "SweepFunction").Environment.Variables
	env["OUTFLOW_TABLE"] = "outbox"
	_, err = config.Load(func(k string) string { return env[k] })
	require.NoError(t, err)

	granted := map[string]bool{}
	for _, g := range sendGrants(statements(t, tpl)["SweepRole"]) {
		granted[g.resource] = true
	}
	routes, err := delivery.ParseRoutes(overrides["Routes"])
	require.NoError(t, err)
	targets, err := routes.Targets()
	require.NoError(t, err)
	for name, tg := range targets {
		arn := tg.Address
		if tg.Kind == delivery.KindSQS {
			arn = queueURLToARN(t, tg.Address)
		}
		require.True(t, granted[arn], "route %s: %s is not in the ARN lists", name, arn)
	}
}

// queueURLToARN is the ARN of the queue at an SQS URL
// (https://sqs.REGION.amazonaws.com/ACCOUNT/NAME).
func queueURLToARN(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	require.NoError(t, err)
	host := strings.Split(u.Host, ".")
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	require.Len(t, host, 4, raw)
	require.Len(t, parts, 2, raw)
	return "arn:aws:sqs:" + host[1] + ":" + parts[0] + ":" + parts[1]
}
