package stack_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/stack"
)

// sendActions is the one action each kind of target needs: SNS authorizes
// PublishBatch as sns:Publish.
var sendActions = map[delivery.Kind]string{
	delivery.KindSQS:         "sqs:SendMessage",
	delivery.KindSNS:         "sns:Publish",
	delivery.KindEventBridge: "events:PutEvents",
}

// grant is one action on one resource.
type grant struct{ action, resource string }

// routeGrants reads a function's OUTFLOW_ROUTES as the dispatcher does,
// each placeholder filled with an address of its resource's kind, and
// returns the grant each target needs, naming the resource as the roles'
// statements do: a queue by its Arn, a topic by its Ref (the ARN), a bus
// by its Arn.
func routeGrants(t *testing.T, tpl *stack.Template, routes string) (map[string]delivery.Target, []grant) {
	t.Helper()
	values, granted := map[string]string{}, map[string]string{}
	queues, err := tpl.Queues()
	require.NoError(t, err)
	for name, q := range queues {
		url := "https://sqs.us-east-1.amazonaws.com/000000000000/" + name + map[bool]string{true: ".fifo"}[q.FifoQueue]
		values[name], granted[url] = url, "${"+name+".Arn}"
	}
	topics, err := tpl.Topics()
	require.NoError(t, err)
	for name, tp := range topics {
		arn := "arn:aws:sns:us-east-1:000000000000:" + name + map[bool]string{true: ".fifo"}[tp.FifoTopic]
		values[name], granted[arn] = arn, "${"+name+"}"
	}
	buses, err := tpl.EventBuses()
	require.NoError(t, err)
	for name, b := range buses {
		require.NotEmpty(t, b.Name, name)
		arn := "arn:aws:events:us-east-1:000000000000:event-bus/" + b.Name
		values[name+".Arn"], granted[arn] = arn, "${"+name+".Arn}"
	}
	filled, err := stack.Substitute(routes, values)
	require.NoError(t, err, "every route names a queue, topic or bus of the stack")
	parsed, err := delivery.ParseRoutes(filled)
	require.NoError(t, err)
	targets, err := parsed.Targets()
	require.NoError(t, err)
	var need []grant
	for route, tg := range targets {
		res, ok := granted[tg.Address]
		require.True(t, ok, "route %s: %s is not a resource of the stack", route, tg.Address)
		need = append(need, grant{sendActions[tg.Kind], res})
	}
	return targets, need
}

// TestTemplate_RoutesReachEveryKindOfTarget: the example routes name a
// standard and a FIFO queue, an SNS topic and an EventBridge bus with the
// default source and detail-type its events need, all of this stack.
func TestTemplate_RoutesReachEveryKindOfTarget(t *testing.T) {
	t.Parallel()
	tpl := load(t, nil)
	for _, fn := range functions {
		targets, _ := routeGrants(t, tpl, function(t, tpl, fn).Environment.Variables["OUTFLOW_ROUTES"])
		kinds := map[string]int{}
		for route, tg := range targets {
			kinds[fmt.Sprintf("%s fifo=%v", tg.Kind, tg.FIFO)]++
			if tg.Kind == delivery.KindEventBridge {
				require.NotEmpty(t, tg.Source, "%s %s: rows without a source attribute need the route's", fn, route)
				require.NotEmpty(t, tg.DetailType, "%s %s: rows without a detail-type attribute need the route's", fn, route)
			}
		}
		require.Equal(t, map[string]int{"SQS fifo=false": 1, "SQS fifo=true": 1, "SNS fifo=false": 1, "EventBridge fifo=false": 1}, kinds, fn)
	}
}

// TestTemplate_RolesMaySendToExactlyTheRoutedTargets: each role holds the
// send action of each route's kind on exactly the routed queues, topic
// and bus, and no send action on anything else.
func TestTemplate_RolesMaySendToExactlyTheRoutedTargets(t *testing.T) {
	t.Parallel()
	tpl := load(t, nil)
	byRole := statements(t, tpl)
	for _, fn := range functions {
		f := function(t, tpl, fn)
		_, need := routeGrants(t, tpl, f.Environment.Variables["OUTFLOW_ROUTES"])
		role := logical(f.Role)
		var got []grant
		for _, s := range byRole[role] {
			for _, a := range s.Action {
				if !slices.Contains(slices.Collect(maps.Values(sendActions)), a) {
					continue
				}
				for _, r := range s.Resource {
					got = append(got, grant{a, r})
				}
			}
		}
		require.ElementsMatch(t, need, got, "%s (%s)", role, fn)
		for _, g := range got {
			require.False(t, strings.Contains(g.resource, "*"), "%s: %v", role, g)
		}
	}
}
