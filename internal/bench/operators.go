package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/outflowhq/outflow/internal/apilog"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

// OperatorRun is one outflow command run against a table of dead letters.
type OperatorRun struct {
	// Args are the command's arguments, after "outflow".
	Args []string
	// DeadLetters is how many the table held when it ran.
	DeadLetters int
	// Requests counts the requests it made, by "Service.Operation".
	Requests map[string]int
	Wall     time.Duration
	// PeakRSS is the command process's peak resident set, in bytes.
	PeakRSS int64
}

// Operators is the operator commands measured at a number of dead letters.
type Operators struct {
	DeadLetters int
	Shards      int
	// ItemBytes is a dead letter's size as DynamoDB bills it.
	ItemBytes int
	// Seed is how long writing the dead letters took.
	Seed time.Duration
	Runs []OperatorRun
}

// operatorQueue is the routed queue of the dead letters.
const operatorQueue = "orders"

// MeasureOperators builds the outflow CLI into a temporary directory, seeds
// a new table at endpoint with dead letters, and runs each operator command
// as a child process through a proxy that counts its requests, reading its
// peak RSS from the kernel: outflow stats at 1,000 dead letters and at
// deadLetters (count queries, with a cap of 1,000, then --exact), dead list, dead redrive --all,
// and (after the dead letters are written again) dead purge --all. logf
// reports progress.
func MeasureOperators(ctx context.Context, endpoint string, deadLetters int, logf func(string, ...any)) (Operators, error) {
	res := Operators{DeadLetters: deadLetters, Shards: 4}
	dir, err := os.MkdirTemp("", "outflow-operators")
	if err != nil {
		return res, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	bin := filepath.Join(dir, "outflow")
	if out, err := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, "./cmd/outflow").CombinedOutput(); err != nil {
		return res, fmt.Errorf("build outflow: %v: %s", err, out)
	}
	cfg, err := endpointConfig(ctx, endpoint, NewRequests())
	if err != nil {
		return res, err
	}
	client := dynamodb.NewFromConfig(cfg, noCRC)
	table := fmt.Sprintf("outflow-operators-%d", time.Now().UnixNano())
	if err := dynamo.CreateTable(ctx, client, table); err != nil {
		return res, err
	}
	defer func() { _ = dynamo.DeleteTable(context.Background(), client, table) }()
	proxy, err := apilog.Start(endpoint)
	if err != nil {
		return res, err
	}
	defer func() { _ = proxy.Close() }()
	env := []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + os.TempDir(), "OUTFLOW_TABLE=" + table, "OUTFLOW_SHARDS=4",
		"OUTFLOW_ROUTES=" + operatorQueue + "=http://127.0.0.1:1/000000000000/" + operatorQueue,
		"AWS_ENDPOINT_URL=" + proxy.URL, "AWS_REGION=us-east-1",
	}
	run := func(n int, args ...string) error {
		logf("operators: outflow %s at %d dead letters", strings.Join(args, " "), n)
		proxy.Reset()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = env
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = nil, &stderr
		start := time.Now()
		err := cmd.Run()
		wall := time.Since(start)
		if err != nil {
			return fmt.Errorf("outflow %s: %w: %s", strings.Join(args, " "), err, lastLine(stderr.String()))
		}
		r := OperatorRun{Args: args, DeadLetters: n, Requests: proxy.Counts(), Wall: wall}
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			r.PeakRSS = ru.Maxrss * 1024 // kilobytes on Linux
		}
		res.Runs = append(res.Runs, r)
		return nil
	}

	av, err := dynamo.Encode(deadRow(0), res.Shards)
	if err != nil {
		return res, err
	}
	res.ItemBytes = ItemSize(av)
	small := min(1000, deadLetters)
	start := time.Now()
	if err := seedDead(ctx, client, table, 0, small); err != nil {
		return res, err
	}
	if err := run(small, "stats"); err != nil {
		return res, err
	}
	if err := seedDead(ctx, client, table, small, deadLetters); err != nil {
		return res, err
	}
	res.Seed = time.Since(start)
	logf("operators: %d dead letters written in %s", deadLetters, res.Seed.Round(time.Second))
	for _, args := range [][]string{{"stats"}, {"stats", "--cap", "1000"}, {"stats", "--exact"}, {"dead", "list"}, {"dead", "redrive", "--all"}} {
		if err := run(deadLetters, args...); err != nil {
			return res, err
		}
	}
	// The redrive made them pending: write them again as dead letters.
	if err := seedDead(ctx, client, table, 0, deadLetters); err != nil {
		return res, err
	}
	if err := run(deadLetters, "dead", "purge", "--all", "--yes"); err != nil {
		return res, err
	}
	return res, nil
}

// seedDead writes dead letters from..to-1 of operatorQueue, as the store
// encodes them, 25 a BatchWriteItem, 8 requests at a time.
func seedDead(ctx context.Context, client *dynamodb.Client, table string, from, to int) error {
	chunks := make(chan []types.WriteRequest)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for range 8 {
		wg.Go(func() {
			for reqs := range chunks {
				for len(reqs) > 0 {
					out, err := client.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: reqs}})
					if err != nil {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
						break
					}
					reqs = out.UnprocessedItems[table]
				}
			}
		})
	}
	var err error
	var batch []types.WriteRequest
	for i := from; i < to && err == nil; i++ {
		var av map[string]types.AttributeValue
		av, err = dynamo.Encode(deadRow(i), 4)
		batch = append(batch, types.WriteRequest{PutRequest: &types.PutRequest{Item: av}})
		if len(batch) == 25 || i == to-1 {
			chunks <- batch
			batch = nil
		}
	}
	close(chunks)
	wg.Wait()
	return errors.Join(append(errs, err)...)
}

// deadRow is the benchmark's dead letter number i.
func deadRow(i int) outbox.Row {
	failed := time.UnixMilli(1_800_000_000_000)
	return outbox.Row{
		Key: fmt.Sprintf("dead-%07d", i), Queue: operatorQueue, Payload: []byte(`{"order":12345,"note":"a dead letter of the operator benchmark"}`),
		Status: outbox.StatusFailed, Attempt: 8, CreatedAt: failed, FailedAt: failed.Add(time.Duration(i) * time.Millisecond),
		LastError: "send: AWS.SimpleQueueService.NonExistentQueue", Errors: []outbox.AttemptError{{At: failed, Attempt: 8, Message: "send: AWS.SimpleQueueService.NonExistentQueue"}},
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// RenderOperators is the markdown section of the operator commands'
// figures, a heading and a table, for docs/capacity.md.
func RenderOperators(r Operators) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	w("## Operator commands at %s dead letters", thousands(r.DeadLetters))
	w("")
	w("`outflow` built and run as a child process against the moto server, through a proxy that counts its requests by API; peak memory is the process's maximum resident set (from the kernel, `getrusage`). "+
		"The table held %s dead letters of one routed queue (%d bytes each, written in %s with BatchWriteItem, 8 requests at a time) and no pending row; %d shards. "+
		"Wall times are moto's, which answers a query by sorting the whole table in Python, not DynamoDB's: compare requests and memory, not seconds. "+
		"Produced by `go run ./cmd/outflow-bench -only operators -out docs`.", thousands(r.DeadLetters), r.ItemBytes, r.Seed.Round(time.Second), r.Shards)
	if r.DeadLetters < 100_000 {
		for _, run := range r.Runs {
			if len(run.Args) > 1 && run.Args[1] == "redrive" && run.Wall > 0 {
				rate := float64(run.DeadLetters) / run.Wall.Seconds()
				w("")
				w("Measured at %s dead letters, not the 100,000 aimed at: moto redrove %.0f dead letters a second here (on a machine shared with other test runs), "+
					"so at 100,000 the redrive alone would take about %.0f minutes, and the run is kept to about 10 minutes. "+
					"What this shows at any size is how requests and memory grow: compare the rows at 1,000 and %s dead letters.",
					thousands(r.DeadLetters), rate, 100_000/rate/60, thousands(r.DeadLetters))
			}
		}
	}
	w("")
	w("| command | dead letters | requests | by API | wall time | peak RSS |")
	w("| --- | ---: | ---: | --- | ---: | ---: |")
	for _, run := range r.Runs {
		total := 0
		var by []string
		for _, op := range slices.Sorted(maps.Keys(run.Requests)) {
			total += run.Requests[op]
			by = append(by, fmt.Sprintf("%s %s", strings.TrimPrefix(op, "DynamoDB."), thousands(run.Requests[op])))
		}
		w("| `outflow %s` | %s | %s | %s | %s | %.1f MB |", strings.Join(run.Args, " "), thousands(run.DeadLetters), thousands(total), strings.Join(by, ", "),
			run.Wall.Round(10*time.Millisecond), float64(run.PeakRSS)/1e6)
	}
	w("")
	w("`outflow stats` makes count queries only: 3 per shard (due, not yet due, the oldest due entry) and 1 per dead queue (the routes and `(none)`), plus the audit item, at any backlog; "+
		"a count stops at `--cap` (10,000 by default) entries and is then a lower bound (`≥`), so a bucket costs at most the pages those entries fill "+
		"(moto pages by whole items, 1 MB of them; DynamoDB by index entries, which are smaller, so fewer pages): with `--cap 1000` the count of %s dead letters stops at 1,000, a lower bound, in as many requests as at 1,000. "+
		"`--exact` reads every dead letter and the status of every due row, as `stats` did before. "+
		"`dead list` keeps the newest `--limit` (50) of the dead letters it reads; `dead redrive --all` and `dead purge --all` act on each page of the dead index as it is read, one write per dead letter, 8 at a time.", thousands(r.DeadLetters))
	return b.String()
}

// thousands writes n with commas.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
