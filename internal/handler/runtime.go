package handler

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/outflowhq/outflow/internal/config"
	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
	"github.com/outflowhq/outflow/internal/telemetry"
)

// Runtime is what a function builds once, at cold start, and reuses for
// every invocation.
type Runtime struct {
	Config config.Config
	Engine *outbox.Engine
	// Audit finds and moves stray rows before each sweep; nil skips it.
	Audit *dynamo.Audit
	// Backstop finds lean rows the stream missed, after the audit; nil
	// skips it.
	Backstop *dynamo.Backstop
	// Invoker starts the other sweep partitions when the backstop runs as
	// more than one (OUTFLOW_SWEEP_PARTITIONS); nil in a function that is
	// not in Lambda, where the caller sets its own.
	Invoker Invoker
	Log     *slog.Logger
	// Metrics receives one EMF line per invocation (stdout in Lambda).
	Metrics io.Writer
	// publisher publishes Config in the table at the first invocation;
	// nil publishes nothing.
	publisher *publisher
	// metricsLevel is the level the EMF lines carry, so Lambda's log
	// filter keeps them at any application log level.
	metricsLevel string
}

// Setup reads and validates the configuration through getenv, and builds
// the AWS clients (from awsCfg), the store, the deliverer and the engine.
// Logs and metrics go to out. An error that fails the init is also logged
// there, as JSON at ERROR, so Lambda keeps it at every log level and the
// operator reads which variable is wrong.
func Setup(awsCfg aws.Config, getenv func(string) string, out io.Writer) (*Runtime, error) {
	log := telemetry.NewLogger(out, getenv)
	rt, err := setup(awsCfg, getenv, out, log)
	if err != nil {
		log.Error("init failed", "error", err.Error())
		return nil, err
	}
	return rt, nil
}

func setup(awsCfg aws.Config, getenv func(string) string, out io.Writer, log *slog.Logger) (*Runtime, error) {
	cfg, err := config.Load(getenv)
	if err != nil {
		return nil, fmt.Errorf("invalid configuration: %w", err)
	}
	call := cfg.Policy.CallTimeout()
	store, err := dynamo.New(dynamo.WithCallTimeout(dynamodb.NewFromConfig(awsCfg), call), cfg.Store)
	if err != nil {
		return nil, err
	}
	audit, err := dynamo.NewAudit(dynamo.WithAuditCallTimeout(dynamodb.NewFromConfig(awsCfg), call), cfg.Store)
	if err != nil {
		return nil, err
	}
	backstop, err := dynamo.NewBackstop(dynamo.WithAuditCallTimeout(dynamodb.NewFromConfig(awsCfg), call), cfg.Store, cfg.Policy.WakeGrace, cfg.Lean)
	if err != nil {
		return nil, err
	}
	backstop.Pages, backstop.Drain = cfg.BackstopPages, cfg.BackstopDrain
	sender, err := delivery.New(delivery.ClientsFromConfig(awsCfg).WithCallTimeout(call), cfg.Routes, cfg.MaxMessageBytes)
	if err != nil {
		return nil, err
	}
	engine, err := outbox.New(store, sender, cfg.Policy, outbox.WithLogger(log))
	if err != nil {
		return nil, err
	}
	rt := &Runtime{Config: cfg, Engine: engine, Audit: audit, Backstop: backstop, Log: log, Metrics: out, metricsLevel: telemetry.RecordLevel(getenv)}
	rt.publisher = &publisher{api: dynamo.WithCallTimeout(dynamodb.NewFromConfig(awsCfg), call), table: cfg.Store.Table,
		by: getenv("AWS_LAMBDA_FUNCTION_NAME"), what: cfg.Published()}
	// Lambda names the running function; the fan-out invokes it again.
	if name := getenv("AWS_LAMBDA_FUNCTION_NAME"); name != "" && cfg.SweepPartitions > 1 {
		rt.Invoker = LambdaInvoker{API: lambda.NewFromConfig(awsCfg), Function: name}
	}
	return rt, nil
}

// report logs a summary and emits its metrics; a failed metrics write is
// logged, never returned, since the rows are already settled.
func (rt *Runtime) report(ctx context.Context, s telemetry.Summary) {
	rt.Log.InfoContext(ctx, s.Function+" finished",
		"claimed", s.Claimed, "delivered", s.Delivered, "retried", s.Retried,
		"dead_lettered", s.DeadLettered, "released", s.Released, "expired", s.Expired,
		"skipped", s.Skipped, "conflicts", s.Conflicts, "errors", s.Errors,
		"oldest_due_age_ms", s.OldestDueAgeMs, "duration_ms", s.DurationMs, "stopped", s.Stopped,
		"records", s.Records, "ignored", s.Ignored, "stray_rows", s.StrayRows, "unrouted_rows", s.UnroutedRows, "unplaced_rows", s.UnplacedRows,
		"throttled", s.Throttled, "claim_concurrency", s.ClaimConcurrency, "unclaimed", s.Unclaimed, "partition", s.Partition)
	if err := telemetry.WriteEMF(rt.Metrics, rt.Config.MetricsNamespace, rt.Config.Store.Table, rt.metricsLevel, time.Now(), s); err != nil {
		rt.Log.WarnContext(ctx, "emit metrics failed", "error", err)
	}
}
