// Package cli is the outflow command: dead-letter inspection, redrive and
// purge, backlog statistics, enqueue, a one-off sweep, and the local stack
// runner. cmd/outflow only calls Execute.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/spf13/cobra"

	"github.com/outflowhq/outflow/internal/config"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
	"github.com/outflowhq/outflow/internal/sdkhttp"
)

// Exit codes.
const (
	ExitOK    = 0
	ExitError = 1
	ExitUsage = 2
)

// usageError is a mistake in how the command was called (exit 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// app holds the global flags and what they build.
type app struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	now            func() time.Time

	table, region, endpoint, output string
	shards                          int
	// orderedRoutes is --ordered, where a command takes it.
	orderedRoutes string
}

// Execute runs the command line args and returns the exit code: 0 on
// success, 1 on error, 2 on bad usage. Errors go to stderr as one line.
// Flag defaults come from the environment (OUTFLOW_TABLE, OUTFLOW_SHARDS,
// AWS_REGION, AWS_ENDPOINT_URL) through getenv.
func Execute(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	a := &app{stdout: stdout, stderr: stderr, getenv: getenv, now: time.Now}
	root := a.rootCommand()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	fmt.Fprintln(stderr, "outflow: "+oneLine(err.Error()))
	var ue usageError
	msg := err.Error()
	if errors.As(err, &ue) || strings.HasPrefix(msg, "required flag") {
		return ExitUsage
	}
	return ExitError
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "outflow",
		Short: "Operate the Outflow outbox dispatcher: dead letters, stats, enqueue, sweep, local stack",
		Long: "Operate the Outflow outbox dispatcher: dead letters, stats, enqueue, sweep, local stack.\n\n" +
			"Exit codes: 0 success, 1 error, 2 bad usage (an unknown command or flag, a bad value); errors are one line on stderr.\n" +
			"Durations (--since, --older-than, --delay, --timeout, --sweep-every) take Go's units and days: 90s, 15m, 12h, 7d, 1d12h.\n" +
			"--output json prints one JSON document with snake_case keys everywhere (key, failed_at, last_error, errors[].attempt), " +
			"times in RFC 3339 UTC, and ages and durations as integers whose key names the unit (oldest_due_age_ms, duration_ms, elapsed_ns).",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(*cobra.Command, []string) error {
			if a.output != "table" && a.output != "json" {
				return usagef("--output must be table or json, got %q", a.output)
			}
			return nil
		},
	}
	root.SetFlagErrorFunc(flagError)
	shards, _ := strconv.Atoi(a.getenv("OUTFLOW_SHARDS"))
	if shards == 0 {
		shards = 4
	}
	f := root.PersistentFlags()
	f.StringVar(&a.table, "table", a.getenv("OUTFLOW_TABLE"), "outbox table name; $OUTFLOW_TABLE when not given")
	f.StringVar(&a.region, "region", a.getenv("AWS_REGION"), "AWS region; $AWS_REGION when not given")
	f.StringVar(&a.endpoint, "endpoint", a.getenv("AWS_ENDPOINT_URL"), "AWS endpoint URL, e.g. a local moto or LocalStack; $AWS_ENDPOINT_URL when not given")
	f.StringVar(&a.output, "output", "table", "output format: table or json")
	f.IntVar(&a.shards, "shards", shards, "due-index shards, as the dispatcher's OUTFLOW_SHARDS")
	root.AddCommand(a.deadCommand(), a.statsCommand(), a.enqueueCommand(), a.sweepCommand(), a.configCommand(), a.localCommand(), a.motoCommand(), a.checkCommand(), a.uiCommand(), a.versionCommand())
	return groupCommand(root)
}

// args wraps a cobra argument check so its failure is a usage error.
func args(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, a []string) error {
		if err := check(cmd, a); err != nil {
			return usageError{err}
		}
		return nil
	}
}

// awsConfig loads the SDK configuration with the global flags applied. A
// loopback endpoint with no credentials in the environment gets static
// test credentials, which local emulators accept.
func (a *app) awsConfig(ctx context.Context) (aws.Config, error) {
	var opts []func(*awsconfig.LoadOptions) error
	if a.region != "" {
		opts = append(opts, awsconfig.WithRegion(a.region))
	}
	if a.endpoint != "" {
		if loopback(a.endpoint) && a.getenv("AWS_ACCESS_KEY_ID") == "" && a.getenv("AWS_PROFILE") == "" {
			opts = append(opts, awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")))
			if a.region == "" {
				opts = append(opts, awsconfig.WithRegion("us-east-1"))
			}
		}
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load aws config: %w", err)
	}
	// sdkhttp: a request the server answered is not sent again. Wrapped
	// after loading: the loader adds a custom CA bundle (AWS_CA_BUNDLE)
	// only to its own client type.
	cfg.HTTPClient = sdkhttp.Client(cfg.HTTPClient)
	if a.endpoint != "" {
		cfg.BaseEndpoint = aws.String(a.endpoint)
	}
	return cfg, nil
}

func loopback(endpoint string) bool {
	u, err := url.Parse(endpoint)
	if err != nil {
		return false
	}
	if u.Hostname() == "localhost" {
		return true
	}
	ip := net.ParseIP(u.Hostname())
	return ip != nil && ip.IsLoopback()
}

// dynamoClient is a DynamoDB client for the configured endpoint, whose
// errors name the table.
func (a *app) dynamoClient(ctx context.Context) (*dynamodb.Client, error) {
	cfg, err := a.awsConfig(ctx)
	if err != nil {
		return nil, err
	}
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		// moto's CRC32 header does not always match its body.
		o.DisableValidateResponseChecksum = a.endpoint != "" && loopback(a.endpoint)
	}, nameTable(a.table)), nil
}

// orderedFlag adds --ordered to cmd.
func (a *app) orderedFlag(cmd *cobra.Command) {
	cmd.Flags().StringVar(&a.orderedRoutes, "ordered", "",
		"the dispatcher's ordered routes, none or route[=block|skip],... (default $OUTFLOW_ORDERED, else those the dispatcher published, else none)")
}

// ordered reads the dispatcher's ordered routes with their dead-head
// policies, as the functions read OUTFLOW_ORDERED: from --ordered if given,
// else from OUTFLOW_ORDERED, else from the configuration the dispatcher
// published in the table, else none.
func (a *app) ordered(ctx context.Context) (map[string]outbox.DeadHead, error) {
	v, from := a.orderedRoutes, "--ordered"
	if v == "" {
		v, from = a.getenv("OUTFLOW_ORDERED"), "OUTFLOW_ORDERED"
	}
	if strings.TrimSpace(v) == "" {
		pub, found, err := a.publishedIfAny(ctx)
		if err != nil || !found {
			return nil, err
		}
		v, from = pub.OrderedString(), "the published ordered routes"
	}
	ordered, err := config.ParseOrdered(v)
	if err != nil {
		return nil, usageError{fmt.Errorf("%s=%q: %w", from, v, err)}
	}
	return ordered, nil
}

// unsureWait is the unsure wait the dispatcher published, zero if none
// (an item published before the field, or none): operate.HoldWait turns
// it into the wait a purge holds for.
func (a *app) unsureWait(ctx context.Context) (time.Duration, error) {
	pub, _, err := a.publishedIfAny(ctx)
	return pub.UnsureWait, err
}

// operator opens the table for operator commands.
func (a *app) operator(ctx context.Context) (*dynamo.Operator, error) {
	if a.table == "" {
		return nil, usagef("no table: pass --table or set OUTFLOW_TABLE")
	}
	client, err := a.dynamoClient(ctx)
	if err != nil {
		return nil, err
	}
	return dynamo.NewOperator(client, dynamo.Config{Table: a.table, Shards: a.shards})
}
