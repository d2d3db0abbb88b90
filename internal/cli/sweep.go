package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/spf13/cobra"

	"github.com/outflowhq/outflow/internal/config"
	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
	"github.com/outflowhq/outflow/internal/telemetry"
)

// engine builds the same engine and stray-row audit the sweep function
// runs, configured from the OUTFLOW_* environment with --table and the
// dispatcher settings given (see settings.over: this shell's, else the
// published ones) applied on top, then adjust (if any).
func (a *app) engine(cmd *cobra.Command, client *dynamodb.Client, s settings, pub *dynamo.Published, log *slog.Logger, adjust func(*config.Config)) (*outbox.Engine, *dynamo.Audit, config.Config, error) {
	cfg, err := config.Load(func(k string) string {
		if k == "OUTFLOW_TABLE" {
			return a.table
		}
		if _, dispatcher := s[k]; dispatcher {
			return s.over(pub, k)
		}
		return a.getenv(k)
	})
	if err != nil {
		return nil, nil, cfg, usageError{err}
	}
	if adjust != nil {
		adjust(&cfg)
	}
	awsCfg, err := a.awsConfig(cmd.Context())
	if err != nil {
		return nil, nil, cfg, err
	}
	// Each call bounded as in the functions, so a hung call cannot outlast
	// the lease of a row this sweep claimed.
	call := cfg.Policy.CallTimeout()
	store, err := dynamo.New(dynamo.WithCallTimeout(client, call), cfg.Store)
	if err != nil {
		return nil, nil, cfg, err
	}
	audit, err := dynamo.NewAudit(dynamo.WithAuditCallTimeout(client, call), cfg.Store)
	if err != nil {
		return nil, nil, cfg, err
	}
	sender, err := delivery.New(delivery.ClientsFromConfig(awsCfg).WithCallTimeout(call), cfg.Routes, cfg.MaxMessageBytes)
	if err != nil {
		return nil, nil, cfg, err
	}
	e, err := outbox.New(store, sender, cfg.Policy, outbox.WithLogger(log))
	return e, audit, cfg, err
}

func (a *app) sweepCommand() *cobra.Command {
	var routes, partition string
	var grace, withAudit, withBackstop, routesDiffer bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "sweep",
		Short: "Run one sweep now, with the same engine and configuration as the sweep function",
		Long: "sweep runs one sweep with the sweep function's engine. Its routes, ordered routes (OUTFLOW_ORDERED), shards and " +
			"size limit are those given here (flags, then OUTFLOW_* variables), else those the dispatcher published in the table " +
			"(outflow config). Where some given here differ from the published ones, it refuses to run (exit 2) and names them, " +
			"unless --routes-differ: a row whose route it lacks is retried, and dead-lettered once its budget is spent.",
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			part := outbox.Whole
			if partition != "" {
				var err error
				if part, err = outbox.ParsePartition(partition); err != nil {
					return usageError{err}
				}
			}
			if a.table == "" {
				return usagef("no table: pass --table or set OUTFLOW_TABLE")
			}
			client, err := a.dynamoClient(cmd.Context())
			if err != nil {
				return err
			}
			pub, isPublished, err := a.published(cmd.Context(), client)
			if err != nil {
				return err
			}
			// A sweep with routes other than the dispatcher's would retry
			// (and in the end dead-letter) live rows of a route it lacks, or
			// send them elsewhere, or out of their group's order. Where this
			// shell's settings agree with the published ones, those fill in
			// what it does not give; told to sweep anyway, it runs on its own.
			given := a.shellSettings(cmd, routes)
			var published *dynamo.Published
			log := telemetry.NewLogger(a.stderr, a.getenv)
			if isPublished {
				mine, err := given.onPublished(pub)
				if err != nil {
					return err
				}
				switch diffs := pub.Diff(mine); {
				case len(diffs) == 0:
					published = &pub
				case !routesDiffer:
					return a.differs(pub, diffs, "drop --routes, --shards and the OUTFLOW_* variables that differ to sweep with the published ones, or pass --routes-differ to sweep with these anyway")
				default:
					log.WarnContext(cmd.Context(), "sweeping with settings that differ from the published ones (--routes-differ)", "differences", strings.Join(diffs, "; "))
				}
			}
			e, audit, cfg, err := a.engine(cmd, client, given, published, log, func(c *config.Config) {
				if !grace {
					c.Policy.WakeGrace = 0
				}
			})
			if err != nil {
				return err
			}
			if err := part.Validate(cfg.Store.Shards); err != nil {
				return usageError{fmt.Errorf("--partition: %w", err)}
			}
			// As the functions do, the sweep runs under a deadline shorter
			// than the lease: it stops claiming the margin before it, and a
			// claim never outlives the sweep that holds it.
			if timeout == 0 {
				timeout = cfg.Policy.Lease - cfg.Policy.DeadlineMargin
			}
			if err := cfg.Policy.CheckDeadline(timeout); err != nil {
				return usageError{fmt.Errorf("--timeout: %w", err)}
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			// Only when asked: the audit moves every row outside shards
			// 0..--shards-1, and a shell whose --shards is not the
			// dispatcher's would move valid rows and record them as stray.
			// Then as the sweep function: the audit first, so the rows it
			// moves are swept now.
			var found dynamo.AuditResult
			if withAudit {
				var aerr error
				found, aerr = audit.Run(ctx, a.now())
				for _, f := range found.Found {
					log.WarnContext(ctx, "stray row: its shard is never swept", "key", f.Key, "shard", f.Shard, "outcome", f.Outcome, "error", f.Error)
				}
				if aerr != nil {
					found.Errors++
					log.WarnContext(ctx, "stray-row audit failed", "error", aerr)
				}
			}
			var missed dynamo.BackstopResult
			if withBackstop {
				missed = a.backstopPass(ctx, client, cfg, log)
			}
			res, err := e.SweepPartition(ctx, part)
			s := telemetry.NewSummary("sweep", res)
			s.MissedRows, s.MissedRowWaitMs = missed.Indexed, missed.LongestWait.Milliseconds()
			s.Errors += missed.Errors
			s.DeadLettered += missed.DeadLettered
			if part.Count > 1 {
				s.Partition = part.String()
			}
			s.StrayRows, s.DeadLettered, s.Errors = found.Strays(), s.DeadLettered+found.DeadLettered, s.Errors+found.Errors
			if perr := a.emit(s, func(w io.Writer) { printSummary(w, s) }); perr != nil {
				return perr
			}
			return err
		},
	}
	cmd.Flags().StringVar(&routes, "routes", "", "queue routes name=url,... (default $OUTFLOW_ROUTES, else the published ones)")
	cmd.Flags().BoolVar(&routesDiffer, "routes-differ", false, "sweep even where the routes, ordered routes, shards or size limit given here differ from those the dispatcher published in the table (outflow config)")
	cmd.Flags().BoolVar(&grace, "wake-grace", false, "leave young rows to the wake, as the scheduled sweep does")
	cmd.Flags().StringVar(&partition, "partition", "", "sweep only partition I of K, \"I/K\", the shards s with s mod K = I, as one of the sweep function's OUTFLOW_SWEEP_PARTITIONS sweeps does (default: every shard)")
	durationVar(cmd.Flags(), &timeout, "timeout", 0, "stop the sweep after this long, as the function's timeout does; shorter than the lease (default: the lease less the deadline margin)")
	cmd.Flags().BoolVar(&withBackstop, "backstop", false, "first run the lean backstop over the whole table, from its start, where the sweep function reads a few pages a sweep: every pending or claimed row with no shard (older than the wake grace with --wake-grace) goes into the due index, and this sweep delivers it (a lean stack whose stream was down; costs a Scan of the whole table)")
	cmd.Flags().BoolVar(&withAudit, "audit", false, "first audit the due index for stray rows, as the sweep function does: moves every row whose shard is not 0..--shards-1, so --shards must be the dispatcher's")
	return cmd
}

// backstopPass runs one whole pass of the lean backstop over the table,
// from its start (whatever place the sweep function's runs have reached)
// to its end or ctx's: what an operator draining a lean stack by hand
// wants, where the sweep function reads a few pages a sweep. It runs
// whatever OUTFLOW_LEAN says, and turns the function's backstop on only
// if it finds rows (then there are lean rows). Its age threshold is this
// sweep's wake grace: none unless --wake-grace.
func (a *app) backstopPass(ctx context.Context, client *dynamodb.Client, cfg config.Config, log *slog.Logger) dynamo.BackstopResult {
	b, err := dynamo.NewBackstop(dynamo.WithAuditCallTimeout(client, cfg.Policy.CallTimeout()), cfg.Store, cfg.Policy.WakeGrace, false)
	if err != nil {
		log.WarnContext(ctx, "lean backstop failed", "error", err)
		return dynamo.BackstopResult{Errors: 1}
	}
	res, err := b.Pass(ctx, a.now())
	for _, key := range res.Keys {
		log.WarnContext(ctx, "lean row the stream never delivered: put in the due index", "key", key)
	}
	for _, key := range res.Refused {
		log.WarnContext(ctx, "row with no shard DynamoDB will not index: dead-lettered with the reason", "key", key)
	}
	if err != nil {
		if res.Errors == 0 {
			res.Errors++
		}
		log.WarnContext(ctx, "lean backstop failed", "error", err)
	}
	return res
}

func printSummary(w io.Writer, s telemetry.Summary) {
	fmt.Fprintln(w, "CLAIMED\tDELIVERED\tRETRIED\tDEAD-LETTERED\tRELEASED\tCONFLICTS\tERRORS\tWAITING\tBLOCKED GROUPS\tSTRAY\tUNROUTED\tUNPLACED\tTHROTTLED\tMIN CONCURRENCY\tSTOPPED\tMS")
	fmt.Fprintf(w, "%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%d\n", s.Claimed, s.Delivered, s.Retried, s.DeadLettered, s.Released, s.Conflicts, s.Errors,
		s.Waiting, s.BlockedGroups, s.StrayRows, s.UnroutedRows, s.UnplacedRows, s.Throttled, s.ClaimConcurrency, s.Stopped, s.DurationMs)
}
