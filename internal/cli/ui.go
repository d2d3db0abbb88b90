package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwschemas "github.com/aws/aws-sdk-go-v2/service/cloudwatch/schemas"
	"github.com/aws/smithy-go/transport/http/protocol/awsquery"
	"github.com/spf13/cobra"

	"github.com/outflowhq/outflow/internal/console"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/telemetry"
)

// uiDefaultAddr is where outflow ui listens unless told otherwise.
const uiDefaultAddr = "127.0.0.1:8080"

// uiFlags are the flags of outflow ui.
type uiFlags struct {
	addr             string
	remote, readOnly bool
	refresh          time.Duration
	stats            statsFlags
	namespace        string
	noMetrics        bool
}

func (a *app) uiCommand() *cobra.Command {
	var f uiFlags
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "Serve a web console for operators: backlog, dead letters, blocked groups, row lookup, redrive and purge",
		Long: "ui serves a web console on the table, with this shell's AWS credentials, until Ctrl-C. It binds 127.0.0.1 by default; " +
			"an address beyond loopback needs --allow-remote, and the console then asks for an access token it prints at start " +
			"(plain HTTP: put it behind TLS, or reach it through an SSH tunnel, rather than across a network). Requests that name " +
			"another Host are refused (DNS rebinding), every action is a POST with a CSRF token, the pages run no script under a strict " +
			"Content-Security-Policy, and --read-only shows no action and refuses every POST. Its counts are those of outflow stats " +
			"--blocked (--routes, --queues, --cap as there); its redrive and purge are the conditional writes of outflow dead redrive " +
			"and purge. Its log (stderr) holds method, path and status, never a query, a form or a payload.",
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.refresh < console.MinRefresh {
				return usagef("--refresh %s: at least %s", f.refresh, console.MinRefresh)
			}
			if f.stats.cap < 0 {
				return usagef("--cap must be 0 (no cap) or more, got %d", f.stats.cap)
			}
			host, _, err := net.SplitHostPort(f.addr)
			if err != nil || host == "" {
				return usagef("--addr %q: want host:port, e.g. %s", f.addr, uiDefaultAddr)
			}
			ip := net.ParseIP(host)
			if ip != nil && ip.IsUnspecified() {
				// The console answers only requests that name the address it
				// is bound to (DNS rebinding): a wildcard names none.
				return usagef("--addr %s: bind the address or name clients will use, not a wildcard", f.addr)
			}
			local := ip != nil && ip.IsLoopback()
			if !local && !f.remote {
				return usagef("--addr %s is not a loopback address: add --allow-remote to serve beyond this machine (with an access token)", f.addr)
			}
			deadQueues, err := a.deadQueues(cmd.Context(), f.stats)
			if err != nil {
				return err
			}
			// Read once now, so a bad --ordered fails at start, not on a page.
			if _, err := a.ordered(cmd.Context()); err != nil {
				return err
			}
			op, err := a.operator(cmd.Context())
			if err != nil {
				return err
			}
			var metrics *console.Metrics
			if !f.noMetrics {
				awsCfg, err := a.awsConfig(cmd.Context())
				if err != nil {
					return err
				}
				metrics = &console.Metrics{API: cloudwatch.NewFromConfig(awsCfg, func(o *cloudwatch.Options) {
					if a.endpoint != "" && loopback(a.endpoint) {
						// moto serves CloudWatch's Query protocol, not the
						// SDK's default (CBOR).
						o.Protocol = awsquery.New(cwschemas.GraniteServiceVersion20100801)
					}
				}), Namespace: f.namespace}
			}
			ln, err := net.Listen("tcp", f.addr)
			if err != nil {
				return fmt.Errorf("ui: %w", err)
			}
			defer ln.Close()
			// The Host requests must name: --addr's host, as given (a name
			// stays a name), with the port bound (--addr's, or the free one
			// port 0 found).
			_, port, err := net.SplitHostPort(ln.Addr().String())
			if err != nil {
				return fmt.Errorf("ui: %w", err)
			}
			cfg := console.Config{
				Operator: op, Ordered: a.ordered, UnsureWait: a.unsureWait, DeadQueues: deadQueues, Cap: f.stats.cap, Metrics: metrics,
				Addr: net.JoinHostPort(host, port), ReadOnly: f.readOnly, Refresh: f.refresh, Log: telemetry.NewLogger(a.stderr, a.getenv),
			}
			if !local {
				cfg.Token = console.NewToken()
			}
			return a.serveConsole(cmd.Context(), ln, cfg)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.addr, "addr", uiDefaultAddr, "host:port to listen on (port 0: any free port); beyond loopback only with --allow-remote")
	fl.BoolVar(&f.remote, "allow-remote", false, "allow an --addr beyond loopback; the console then requires the access token it prints")
	fl.BoolVar(&f.readOnly, "read-only", false, "show no action and refuse every POST")
	durationVar(fl, &f.refresh, "refresh", console.DefaultRefresh, "how often the overview reloads itself (at least 15s)")
	fl.IntVar(&f.stats.cap, "cap", dynamo.DefaultCountCap, "as outflow stats --cap")
	fl.StringVar(&f.stats.routes, "routes", "", "queue routes name=url,... whose dead letters the overview counts (default $OUTFLOW_ROUTES)")
	fl.StringVar(&f.stats.queues, "queues", "", "more queues whose dead letters the overview counts, name,...")
	namespace := a.getenv("OUTFLOW_METRICS_NAMESPACE")
	if namespace == "" {
		namespace = "Outflow"
	}
	fl.StringVar(&f.namespace, "metrics-namespace", namespace, "CloudWatch namespace of the stack's metrics, the template's MetricsNamespace (default $OUTFLOW_METRICS_NAMESPACE, else Outflow)")
	fl.BoolVar(&f.noMetrics, "no-metrics", false, "do not read CloudWatch for the overview's charts")
	a.orderedFlag(cmd)
	return cmd
}

// serveConsole serves the console on ln until ctx ends, then lets the
// requests under way finish (5s at most).
func (a *app) serveConsole(ctx context.Context, ln net.Listener, cfg console.Config) error {
	c, err := console.New(cfg)
	if err != nil {
		return err
	}
	url := "http://" + cfg.Addr + "/"
	if cfg.Token != "" {
		url += "?token=" + cfg.Token
	}
	mode := ""
	if cfg.ReadOnly {
		mode = " (read-only)"
	}
	if cfg.Token != "" {
		fmt.Fprintln(a.stderr, "outflow ui: the access token is in the URL below; anyone with it can redrive and purge (plain HTTP: keep it off untrusted networks)")
	}
	fmt.Fprintf(a.stderr, "outflow ui: table %s%s at %s\n", cfg.Operator.Table(), mode, url)
	srv := &http.Server{Handler: c, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("ui: %w", err)
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shut); err != nil {
		return fmt.Errorf("ui: %w", err)
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("ui: %w", err)
	}
	return nil
}
