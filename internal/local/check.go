package local

import (
	"fmt"
	"maps"
	"slices"

	"github.com/outflowhq/outflow/internal/config"
	"github.com/outflowhq/outflow/internal/target"
	"github.com/outflowhq/outflow/internal/targetcheck"
)

// CheckInput is what the local stack routes, and what the template grants
// its functions (which moto, enforcing no IAM, does not check): the
// QueueArns, TopicArns and BusArns parameters, and the example targets
// when ExampleTargets is "true".
func (r *Runner) CheckInput() (targetcheck.Input, error) {
	env := r.Stack.Env["SweepFunction"]
	routes, err := target.ParseRoutes(env["OUTFLOW_ROUTES"])
	if err != nil {
		return targetcheck.Input{}, fmt.Errorf("routes: %w", err)
	}
	ordered, err := config.ParseOrdered(env["OUTFLOW_ORDERED"])
	if err != nil {
		return targetcheck.Input{}, fmt.Errorf("ordered routes: %w", err)
	}
	in := targetcheck.Input{Routes: routes, Ordered: slices.Sorted(maps.Keys(ordered)),
		Grants: &targetcheck.Grants{Queues: r.listParam("QueueArns"), Topics: r.listParam("TopicArns"), Buses: r.listParam("BusArns")}}
	if fmt.Sprint(r.Template.Parameters["ExampleTargets"].Value) == "true" {
		for _, q := range []string{"OrdersQueue", "EventsQueue"} {
			if arn, ok := r.Stack.Values[q+".Arn"]; ok {
				in.Grants.Queues = append(in.Grants.Queues, arn)
			}
		}
		if arn, ok := r.Stack.TopicARNs["NoticesTopic"]; ok {
			in.Grants.Topics = append(in.Grants.Topics, arn)
		}
		if arn, ok := r.Stack.BusARNs["DomainBus"]; ok {
			in.Grants.Buses = append(in.Grants.Buses, arn)
		}
	}
	return in, nil
}

// listParam is a CommaDelimitedList parameter's elements, empty ones left out.
func (r *Runner) listParam(name string) []string {
	var out []string
	l, _ := r.Template.Parameters[name].Value.([]any)
	for _, e := range l {
		if s := fmt.Sprint(e); s != "" {
			out = append(out, s)
		}
	}
	return out
}
