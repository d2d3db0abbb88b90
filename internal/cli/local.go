package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/outflowhq/outflow/internal/local"
)

func (a *app) localCommand() *cobra.Command {
	var opts local.Options
	var params []string
	var keep, noDemo, verbose bool
	cmd := &cobra.Command{
		Use:   "local",
		Short: "Run Outflow end to end on this machine: moto as AWS, the template's table, queues, topics and buses, sweep, wake and consumers",
		Long: "local starts the moto server from .venv (unless --endpoint names one), creates the table, queues, topics and event buses that " +
			"template.yaml defines, runs the sweep on a local schedule and the wake from the table's stream through the " +
			"template's FilterCriteria, and consumes every queue the template creates (never yours). By default it then runs a demo and exits 0 only if every " +
			"row was delivered or dead-lettered as staged. After the deploy it checks the routes against their targets and grants (outflow check). --keep leaves everything running until Ctrl-C. " +
			"--table names the outbox table (a table of that name that exists at the endpoint already is refused, not reused); without it, each run makes a new name, " +
			"as for the queues, topics and buses (OUTFLOW_TABLE is not read: the exports a run prints set it, and would pin the next run's).",
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Endpoint, opts.Region = a.endpoint, a.region
			if cmd.Flags().Changed("table") {
				if a.table == "" {
					return usagef("--table is empty: name the table, or drop --table for a new name each run")
				}
				opts.Table = a.table
			}
			if opts.SweepPartitions < 0 {
				return usagef("--sweep-partitions %d: want 1 or more (0 keeps the template's)", opts.SweepPartitions)
			}
			opts.Params = map[string]string{}
			for _, p := range params {
				k, v, ok := strings.Cut(p, "=")
				if !ok {
					return usagef("--param %q: want Name=Value", p)
				}
				opts.Params[k] = v
			}
			if verbose {
				opts.Logs = a.stderr
			}
			var demo *local.Demo
			if !noDemo {
				opts, demo = local.NewDemo(opts)
			}
			return a.runLocal(cmd.Context(), opts, demo, keep || noDemo)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Template, "template", "template.yaml", "SAM template to provision from")
	f.StringArrayVar(&params, "param", nil, "template parameter override Name=Value (repeatable)")
	durationVar(f, &opts.SweepEvery, "sweep-every", 2*time.Second, "local sweep schedule")
	f.IntVar(&opts.SweepPartitions, "sweep-partitions", 0,
		"sweeps side by side at each scheduled sweep (the template's SweepPartitions; 0 keeps it); raises Shards to match unless --param Shards= sets it")
	f.BoolVar(&opts.RIE, "rie", false, "run the built bootstraps (make build) under the Lambda Runtime Interface Emulator")
	f.StringVar(&opts.Bootstraps, "bootstraps", "bin/host", "directory of the built bootstraps, for --rie")
	f.BoolVar(&keep, "keep", false, "keep everything running after the demo, until Ctrl-C")
	f.BoolVar(&noDemo, "no-demo", false, "stage nothing; just run until Ctrl-C")
	f.BoolVar(&verbose, "verbose", false, "show the functions' logs")
	return cmd
}

func (a *app) runLocal(ctx context.Context, opts local.Options, demo *local.Demo, keep bool) error {
	started := time.Now()
	r, err := local.Start(ctx, opts)
	if err != nil {
		return err
	}
	defer r.Close()
	mode := "in-process"
	if opts.RIE {
		mode = "emulated (RIE)"
	}
	mode += " functions"
	if r.Partitions > 1 {
		mode += fmt.Sprintf(", %d sweep partitions over %s shards", r.Partitions, r.Stack.Env["SweepFunction"]["OUTFLOW_SHARDS"])
	}
	fmt.Fprintf(a.stderr, "outflow local: endpoint %s, table %s, %s, %s, ready in %s\n",
		r.Endpoint, r.Stack.Table, created(len(r.Stack.QueueURLs), len(r.Stack.TopicARNs), len(r.Stack.BusARNs)), mode, time.Since(started).Round(time.Millisecond))
	if err := a.checkLocal(ctx, r); err != nil {
		return err
	}

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	runErr := make(chan error, 1)
	go func() { runErr <- r.Run(runCtx) }()

	var result error
	if demo != nil {
		rep, err := demo.Run(ctx, r, a.stderr, isTerminal(a.stderr))
		if err != nil && ctx.Err() == nil {
			return err
		}
		if err := a.emit(rep, func(w io.Writer) { rep.Print(w, r.Endpoint, r.Stack.Table, keep) }); err != nil {
			return err
		}
		if !rep.OK() {
			result = errors.New("demo failed: the outcome differs from what was staged")
		}
	}
	if keep {
		fmt.Fprintf(a.stderr, "\nrunning until Ctrl-C: endpoint %s, table %s\n", r.Endpoint, r.Stack.Table)
		for name, url := range r.Stack.QueueURLs {
			fmt.Fprintf(a.stderr, "  queue %-12s %s\n", name, url)
		}
		for name, arn := range r.Stack.TopicARNs {
			fmt.Fprintf(a.stderr, "  topic %-12s %s\n", name, arn)
		}
		for name, arn := range r.Stack.BusARNs {
			fmt.Fprintf(a.stderr, "  bus   %-12s %s\n", name, arn)
		}
		fmt.Fprintln(a.stderr, "\nyour own process (a producer, the outflow CLI) reaches this stack with, in its shell:")
		for _, line := range r.Exports() {
			fmt.Fprintln(a.stderr, line)
		}
		fmt.Fprintf(a.stderr, "\nthe web console, in that shell: %s ui   (then open http://%s/)\n", local.Invocation(), uiDefaultAddr)
		<-ctx.Done()
	}
	stop()
	if err := <-runErr; err != nil && result == nil {
		result = err
	}
	return result
}

// created says what the template created besides the table: "4 queues,
// 1 topic, 1 event bus", leaving out what it created none of, and "the
// template created no queues, topics or event buses" when it created none
// (ExampleTargets=false: the routes are yours to give).
func created(queues, topics, buses int) string {
	var parts []string
	for _, c := range []struct {
		n     int
		thing string
	}{{queues, "queue"}, {topics, "topic"}, {buses, "event bus"}} {
		if c.n > 0 {
			parts = append(parts, count(c.n, c.thing))
		}
	}
	if len(parts) == 0 {
		return "the template created no queues, topics or event buses"
	}
	return strings.Join(parts, ", ")
}

// count is n things, "1 topic" or "2 topics".
func count(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	if strings.HasSuffix(thing, "s") {
		return fmt.Sprintf("%d %ses", n, thing)
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
