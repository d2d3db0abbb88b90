package local

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/eventfilter"
	"github.com/outflowhq/outflow/internal/handler"
	"github.com/outflowhq/outflow/internal/moto"
	"github.com/outflowhq/outflow/internal/rie"
	"github.com/outflowhq/outflow/internal/sdkhttp"
	"github.com/outflowhq/outflow/internal/stack"
	"github.com/outflowhq/outflow/internal/streams"
	"github.com/outflowhq/outflow/internal/telemetry"
)

// Options configures a Runner.
type Options struct {
	// Template is the SAM template to provision from.
	Template string
	// Params override template parameters.
	Params map[string]string
	// Endpoint is an AWS endpoint to use; empty starts a moto server.
	Endpoint string
	// Region for the endpoint; empty means us-east-1.
	Region string
	// Table names the outbox table; empty makes a new name each run, as
	// every other resource's. A table of that name that exists already
	// is refused, not reused: its rows and published configuration
	// would belong to another run's queues.
	Table string
	// ExtraRoutes is appended to both functions' OUTFLOW_ROUTES.
	ExtraRoutes string
	// SweepEvery is the local schedule; zero means every 2 seconds.
	SweepEvery time.Duration
	// SweepPartitions, if above zero, sets the template's SweepPartitions:
	// each scheduled sweep fans out to that many partitions. Shards is
	// raised to it when Params leaves Shards at a lower default.
	SweepPartitions int
	// RIE runs the bootstraps in Bootstraps under the emulator instead of
	// calling the handlers in process.
	RIE        bool
	Bootstraps string
	// Logs receives the functions' logs; nil discards them.
	Logs io.Writer

	// Hooks, called from the runner's goroutines.
	OnSweep   func(telemetry.Summary)
	OnWake    func(events.DynamoDBEvent)
	OnMessage func(queue string, m sqstypes.Message, at time.Time)
}

// Runner is Outflow running locally.
type Runner struct {
	opts     Options
	Endpoint string
	Stack    *Stack
	Template *stack.Template
	AWS      aws.Config

	// Partitions is how many sweeps run at each scheduled sweep
	// (OUTFLOW_SWEEP_PARTITIONS).
	Partitions int

	moto  *moto.Server
	sweep function
	wake  function
	// async queues the scheduled sweep's invokes of the other partitions;
	// partitions are the sweep instances that run them (nil with one
	// partition), and invokeAPI serves the emulated bootstraps' invokes.
	async      *asyncQueue
	partitions []function
	invokeAPI  *http.Server
	patterns   []eventfilter.Pattern
	batch      int
	poller     *streams.Poller
	// pids lists every child process the runner started.
	pids []int
}

// localRate is the sweep's OUTFLOW_SWEEP_RATE under the local schedule:
// the schedule's own period, so a sweep stops claiming before the runner
// starts the next; or, for a period within the deadline margin (the
// default 2 s), none: the runner's sweeps of one partition then run one
// after another, and one that is due while another runs waits.
func localRate(every time.Duration, margin string) string {
	if m, err := time.ParseDuration(margin); err == nil && every > m {
		return every.String()
	}
	return "0s"
}

// Start brings up the endpoint, provisions the template and builds both
// functions. Call Run to start the loops and Close to stop everything.
func Start(ctx context.Context, opts Options) (r *Runner, err error) {
	if opts.SweepEvery == 0 {
		opts.SweepEvery = 2 * time.Second
	}
	if opts.Logs == nil {
		opts.Logs = io.Discard
	}
	if opts.Region == "" {
		opts.Region = "us-east-1"
	}
	r = &Runner{opts: opts, Endpoint: opts.Endpoint}
	// Every failure returns a nil runner: stop what this one started.
	started := r
	defer func() {
		if err != nil {
			started.Close()
		}
	}()
	if r.Template, err = loadTemplate(opts); err != nil {
		return nil, err
	}
	if r.Endpoint == "" {
		if r.moto, err = moto.Start(ctx); err != nil {
			return nil, err
		}
		r.pids = append(r.pids, r.moto.Pid())
		r.Endpoint = r.moto.URL
	}
	r.AWS, err = config.LoadDefaultConfig(ctx, config.WithRegion(opts.Region),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")))
	if err != nil {
		return nil, fmt.Errorf("aws config: %w", err)
	}
	r.AWS.BaseEndpoint = aws.String(r.Endpoint)
	r.AWS.HTTPClient = sdkhttp.Client(r.AWS.HTTPClient) // after loading: see handler.Serve
	clients := Clients{
		DynamoDB:    dynamodb.NewFromConfig(r.AWS, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true }),
		SQS:         sqs.NewFromConfig(r.AWS),
		SNS:         sns.NewFromConfig(r.AWS),
		EventBridge: eventbridge.NewFromConfig(r.AWS),
	}
	prefix := "outflow-" + strings.ToLower(rand.Text()[:6])
	if r.Stack, err = Provision(ctx, r.Template, clients, prefix, opts.Table); err != nil {
		return nil, err
	}
	for _, name := range []string{"SweepFunction", "WakeFunction"} {
		env := r.Stack.Env[name]
		if opts.ExtraRoutes != "" {
			env["OUTFLOW_ROUTES"] += "," + opts.ExtraRoutes
		}
		env["AWS_ENDPOINT_URL"], env["AWS_REGION"] = r.Endpoint, opts.Region
		env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"] = "test", "test"
		f, err := r.Template.Function(name)
		if err != nil {
			return nil, err
		}
		if level := f.LoggingConfig.ApplicationLogLevel; level != "" {
			env["AWS_LAMBDA_LOG_LEVEL"] = level
		}
		timeout := time.Duration(f.Timeout) * time.Second
		instances := 1
		if name == "SweepFunction" {
			env["OUTFLOW_SWEEP_RATE"] = localRate(opts.SweepEvery, env["OUTFLOW_DEADLINE_MARGIN"])
			if instances, err = r.fanOut(f, env, prefix); err != nil {
				return nil, err
			}
		}
		// Instance 0 is the function the schedule or the stream invokes;
		// the sweep's others run the partitions' asynchronous invokes.
		for i := range instances {
			var fn function
			if opts.RIE {
				var emu *rie.Emulator
				if fn, emu, err = newEmulated(name, opts.Bootstraps, env, timeout, opts.Logs); err == nil {
					r.pids = append(r.pids, emu.Pid())
				}
			} else {
				fn, err = newInProcess(name, r.AWS, env, timeout, opts.Logs, r.invoker())
			}
			if err != nil {
				return nil, err
			}
			switch {
			case name == "WakeFunction":
				r.wake = fn
			case i == 0:
				r.sweep = fn
			default:
				r.partitions = append(r.partitions, fn)
			}
		}
	}
	if err := r.wakeMapping(); err != nil {
		return nil, err
	}
	r.poller = streams.NewPoller(dynamodbstreams.NewFromConfig(r.AWS), r.Stack.StreamARN, streamtypes.ShardIteratorTypeLatest)
	// Position the iterators now, like a new mapping, so every row staged
	// after Start reaches the wake.
	if _, err := r.poller.Poll(ctx, 1000); err != nil {
		return nil, err
	}
	return r, nil
}

// loadTemplate resolves the template with opts.Params and, when
// opts.SweepPartitions is set, SweepPartitions, with Shards raised to
// match unless Params sets it. ExampleTargets is "true" unless Params
// sets it: the local stack provisions the example queues, topic and bus
// and routes to them, which a deploy does only when asked.
func loadTemplate(opts Options) (*stack.Template, error) {
	params := maps.Clone(opts.Params)
	if params == nil {
		params = map[string]string{}
	}
	if _, set := params["ExampleTargets"]; !set {
		params["ExampleTargets"] = "true"
	}
	if opts.SweepPartitions > 0 {
		params["SweepPartitions"] = strconv.Itoa(opts.SweepPartitions)
	}
	tpl, err := stack.Load(opts.Template, params)
	if err != nil || opts.SweepPartitions == 0 {
		return tpl, err
	}
	if _, set := params["Shards"]; set {
		return tpl, nil // the operator's own: a count above it fails the sweep's init, as deployed
	}
	if shards, err := strconv.Atoi(fmt.Sprint(tpl.Parameters["Shards"].Value)); err == nil && shards < opts.SweepPartitions {
		params["Shards"] = strconv.Itoa(opts.SweepPartitions)
		return stack.Load(opts.Template, params)
	}
	return tpl, nil
}

// fanOut prepares the sweep's partitions from its environment: with
// OUTFLOW_SWEEP_PARTITIONS k above 1, the queue its invokes go to and,
// under the emulator, the local Invoke API the bootstrap's Lambda client
// calls (AWS_ENDPOINT_URL_LAMBDA) under the function name it invokes. It
// returns how many sweep instances to start: one for the schedule and one
// per other partition, as one emulator runs one invocation at a time.
func (r *Runner) fanOut(f stack.Function, env map[string]string, prefix string) (int, error) {
	k, err := strconv.Atoi(env["OUTFLOW_SWEEP_PARTITIONS"])
	r.Partitions = max(1, k)
	if err != nil || k <= 1 {
		return 1, nil // an invalid count fails the function's own init
	}
	var maxAge time.Duration
	if age := f.EventInvokeConfig.MaximumEventAgeInSeconds; age != nil {
		maxAge = time.Duration(*age) * time.Second
	}
	r.async = newAsyncQueue(prefix+"-sweep", 4*k, maxAge)
	if r.opts.RIE {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("local invoke API: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle(invokePath, r.async)
		r.invokeAPI = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = r.invokeAPI.Serve(ln) }()
		env["AWS_ENDPOINT_URL_LAMBDA"] = "http://" + ln.Addr().String()
		env["AWS_LAMBDA_FUNCTION_NAME"] = r.async.function
	}
	return k, nil
}

// invoker is the in-process sweep's Invoker: the async queue, or none.
func (r *Runner) invoker() handler.Invoker {
	if r.async == nil {
		return nil
	}
	return r.async
}

// wakeMapping reads the wake's stream mapping: its filters and batch size.
func (r *Runner) wakeMapping() error {
	f, err := r.Template.Function("WakeFunction")
	if err != nil {
		return err
	}
	var ev stack.StreamEvent
	if err := f.Event("DynamoDB", &ev); err != nil {
		return err
	}
	for _, flt := range ev.FilterCriteria.Filters {
		p, err := eventfilter.Compile(flt.Pattern)
		if err != nil {
			return err
		}
		r.patterns = append(r.patterns, p)
	}
	r.batch = max(1, ev.BatchSize)
	return nil
}

// Pids lists the child processes the runner started (moto, emulators).
func (r *Runner) Pids() []int { return r.pids }

// Run runs the sweep schedule, the stream wake and the consumers until ctx
// ends. It returns the first error that stops a loop, or nil.
func (r *Runner) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	errs := make(chan error, 8+len(r.partitions))
	wg.Go(func() { errs <- r.sweepLoop(ctx) })
	for _, fn := range r.partitions {
		wg.Go(func() { errs <- r.partitionLoop(ctx, fn) })
	}
	wg.Go(func() { errs <- r.wakeLoop(ctx) })
	routes, err := delivery.ParseRoutes(r.Stack.Env["SweepFunction"]["OUTFLOW_ROUTES"])
	if err != nil {
		return err
	}
	for route, url := range routes {
		if !slices.Contains(slices.Collect(maps.Values(r.Stack.QueueURLs)), url) {
			continue // a route to a queue this stack does not have (the demo's broken one)
		}
		wg.Go(func() { errs <- r.consume(ctx, route, url) })
	}
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			all = append(all, err)
		}
	}
	return errors.Join(all...)
}

// schedulerEvent is what EventBridge Scheduler sends the sweep.
const schedulerEvent = `{"version":"0","id":"local","detail-type":"Scheduled Event","source":"aws.scheduler","account":"000000000000","region":"us-east-1","resources":["arn:aws:scheduler:us-east-1:000000000000:schedule/default/outflow-sweep"],"detail":"{}"}`

func (r *Runner) sweepLoop(ctx context.Context) error {
	tick := time.NewTicker(r.opts.SweepEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		r.runSweep(ctx, r.sweep, []byte(schedulerEvent))
	}
}

// partitionLoop runs the partitions' queued invokes on fn, one at a time,
// as one Lambda instance does, and drops those older than the
// function's MaximumEventAgeInSeconds unrun, as Lambda does: the next
// scheduled sweep starts the partition again.
func (r *Runner) partitionLoop(ctx context.Context, fn function) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev := <-r.async.events:
			if age := time.Since(ev.queued); r.async.maxAge > 0 && age > r.async.maxAge {
				fmt.Fprintf(r.opts.Logs, "local: sweep event %s dropped unrun after %s in the queue\n", ev.payload, age.Round(time.Millisecond))
				continue
			}
			r.runSweep(ctx, fn, ev.payload)
		}
	}
}

// runSweep invokes a sweep with payload and hands its summary to OnSweep.
func (r *Runner) runSweep(ctx context.Context, fn function, payload []byte) {
	out, err := fn.invoke(ctx, payload)
	if err != nil {
		if ctx.Err() == nil {
			fmt.Fprintf(r.opts.Logs, "local: sweep invocation %s failed: %v\n", payload, err)
		}
		return
	}
	var s telemetry.Summary
	if err := json.Unmarshal(out, &s); err == nil && r.opts.OnSweep != nil {
		r.opts.OnSweep(s)
	}
}

// wakeLoop polls the stream and invokes the wake with the records the
// mapping's filters pass, in batches of the mapping's size, as Lambda does.
func (r *Runner) wakeLoop(ctx context.Context) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		recs, err := r.poller.Poll(ctx, 1000)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			fmt.Fprintf(r.opts.Logs, "local: stream poll failed: %v\n", err)
			continue
		}
		ev := Filter(r.patterns, streams.Event(r.Stack.StreamARN, r.opts.Region, recs))
		for start := 0; start < len(ev.Records); start += r.batch {
			batch := events.DynamoDBEvent{Records: ev.Records[start:min(start+r.batch, len(ev.Records))]}
			if r.opts.OnWake != nil {
				r.opts.OnWake(batch)
			}
			payload, err := json.Marshal(batch)
			if err != nil {
				return err
			}
			if _, err := r.wake.invoke(ctx, payload); err != nil && ctx.Err() == nil {
				fmt.Fprintf(r.opts.Logs, "local: wake invocation failed: %v\n", err)
			}
		}
	}
}

// Filter keeps the records that match any of the patterns, evaluated on
// the record's JSON as Lambda sees it. No patterns keeps everything.
func Filter(patterns []eventfilter.Pattern, ev events.DynamoDBEvent) events.DynamoDBEvent {
	if len(patterns) == 0 {
		return ev
	}
	var out events.DynamoDBEvent
	for _, rec := range ev.Records {
		raw, err := json.Marshal(rec)
		if err != nil {
			continue
		}
		var m map[string]any
		if json.Unmarshal(raw, &m) == nil && eventfilter.MatchAny(patterns, m) {
			out.Records = append(out.Records, rec)
		}
	}
	return out
}

// consume receives from one routed queue, reports each message under its
// route name and deletes it.
func (r *Runner) consume(ctx context.Context, name, url string) error {
	client := sqs.NewFromConfig(r.AWS)
	for ctx.Err() == nil {
		out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
			MessageAttributeNames: []string{"All"},
			// The group, for the demo's consumer to apply ordered rows.
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameMessageGroupId},
		})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			fmt.Fprintf(r.opts.Logs, "local: receive from %s failed: %v\n", name, err)
			time.Sleep(time.Second)
			continue
		}
		at := time.Now()
		var del []sqstypes.DeleteMessageBatchRequestEntry
		for i, m := range out.Messages {
			if r.opts.OnMessage != nil {
				r.opts.OnMessage(name, m, at)
			}
			del = append(del, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), ReceiptHandle: m.ReceiptHandle})
		}
		if len(del) > 0 {
			if _, err := client.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(url), Entries: del}); err != nil && ctx.Err() == nil {
				fmt.Fprintf(r.opts.Logs, "local: delete from %s failed: %v\n", name, err)
			}
		}
	}
	return nil
}

// Close stops the emulators, the local Invoke API and the moto server the
// runner started.
func (r *Runner) Close() {
	for _, f := range append([]function{r.sweep, r.wake}, r.partitions...) {
		if f != nil {
			f.stop()
		}
	}
	if r.invokeAPI != nil {
		_ = r.invokeAPI.Close()
	}
	if r.moto != nil {
		r.moto.Stop()
	}
}
