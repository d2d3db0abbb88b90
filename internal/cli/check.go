package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/spf13/cobra"

	"github.com/outflowhq/outflow/internal/local"
	"github.com/outflowhq/outflow/internal/targetcheck"
)

// checkReport is what `outflow check` found.
type checkReport struct {
	Source   string                `json:"source"`
	Routes   int                   `json:"routes"`
	Grants   bool                  `json:"grants_checked"`
	Findings []targetcheck.Finding `json:"findings"`
}

func (a *app) checkCommand() *cobra.Command {
	var stackName string
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Check a deployment's routes against its targets: each exists, is FIFO as its name says, keeps order where ordered, and is granted",
		Long: "check reads what the dispatcher routes, from a deployed stack (--stack: its Routes and OrderedRoutes outputs, " +
			"and the QueueArns, TopicArns and BusArns it grants) or from the configuration the functions publish in --table " +
			"(grants then unchecked), and checks each route's queue, topic or bus: it exists; it is FIFO exactly when the " +
			"route's name ends in .fifo; an ordered route's FIFO topic delivers to no standard queue; the functions are " +
			"granted it. Each finding comes with its fix. Exit 1 on any finding.",
		Example: "  outflow check --stack outflow\n  outflow check --table outflow-outbox",
		Args:    args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if stackName == "" && a.table == "" {
				return usagef("give --stack (a deployed stack) or --table (the published configuration)")
			}
			return a.runCheck(cmd.Context(), stackName)
		},
	}
	cmd.Flags().StringVar(&stackName, "stack", "", "the deployed Outflow stack's name: routes and grants from CloudFormation")
	return cmd
}

func (a *app) runCheck(ctx context.Context, stackName string) error {
	cfg, err := a.awsConfig(ctx)
	if err != nil {
		return err
	}
	c := targetcheck.Checker{Queues: sqs.NewFromConfig(cfg), Topics: sns.NewFromConfig(cfg), Buses: eventbridge.NewFromConfig(cfg)}
	var in targetcheck.Input
	var rep checkReport
	if stackName != "" {
		if in, err = c.FromStack(ctx, cloudformation.NewFromConfig(cfg), stackName); err != nil {
			return err
		}
		rep.Source = "stack " + stackName
	} else {
		if in, err = a.publishedInput(ctx); err != nil {
			return err
		}
		rep.Source = "table " + a.table + " (published configuration)"
	}
	if rep.Findings, err = c.Check(ctx, in); err != nil {
		return err
	}
	if rep.Findings == nil {
		rep.Findings = []targetcheck.Finding{} // "findings": [], not null, with none
	}
	rep.Routes, rep.Grants = len(in.Routes), in.Grants != nil
	if err := a.emit(rep, func(w io.Writer) { rep.print(w) }); err != nil {
		return err
	}
	if n := len(rep.Findings); n > 0 {
		return fmt.Errorf("%s", count(n, "finding"))
	}
	return nil
}

// publishedInput is what the functions published in the table: routes and
// ordered routes, with grants unknown.
func (a *app) publishedInput(ctx context.Context) (targetcheck.Input, error) {
	client, err := a.dynamoClient(ctx)
	if err != nil {
		return targetcheck.Input{}, err
	}
	pub, found, err := a.published(ctx, client)
	if err != nil {
		return targetcheck.Input{}, err
	}
	if !found {
		return targetcheck.Input{}, fmt.Errorf("table %s holds no published configuration yet (the functions publish it when they first run): give --stack", a.table)
	}
	in := targetcheck.Input{Routes: pub.Routes}
	for route := range pub.Ordered {
		in.Ordered = append(in.Ordered, route)
	}
	return in, nil
}

func (r checkReport) print(w io.Writer) {
	for _, f := range r.Findings {
		fmt.Fprintf(w, "✗ %s: %s\n    fix: %s\n", f.Route, f.Problem, f.Fix)
	}
	grants := "grants checked"
	if !r.Grants {
		grants = "grants not checked (give --stack)"
	}
	verdict := "all OK"
	if len(r.Findings) > 0 {
		verdict = count(len(r.Findings), "finding")
	}
	fmt.Fprintf(w, "%s checked, from %s, %s: %s\n", count(r.Routes, "route"), r.Source, grants, verdict)
}

// checkLocal runs the check on the local stack once it is up, and prints
// its findings: moto enforces no IAM, so a route left out of the grants
// is delivered here and refused in AWS, and this is where it shows.
func (a *app) checkLocal(ctx context.Context, r *local.Runner) error {
	in, err := r.CheckInput()
	if err != nil {
		return err
	}
	c := targetcheck.Checker{Queues: sqs.NewFromConfig(r.AWS), Topics: sns.NewFromConfig(r.AWS), Buses: eventbridge.NewFromConfig(r.AWS)}
	findings, err := c.Check(ctx, in)
	if err != nil {
		return err
	}
	rep := checkReport{Source: "the local stack", Routes: len(in.Routes), Grants: true, Findings: findings}
	fmt.Fprintln(a.stderr, "outflow check, on the routes and grants deployed:")
	rep.print(a.stderr)
	return nil
}
