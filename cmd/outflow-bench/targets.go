package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/outflowhq/outflow/internal/bench"
	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/moto"
)

// targetRows is how many rows each target's drain stages.
var targetRows = flag.Int("target-rows", 1000, "rows drained to each target (SQS, SNS, EventBridge) against moto")

// targetsHeading opens the targets section of benchmarks.md; `-only
// targets` replaces the section under it.
const targetsHeading = "## Requests per message by target (moto)\n"

// runTargetsOnly drains rows to each target against a moto server of its
// own and splices the section into out/benchmarks.md.
func runTargetsOnly(out string, rows int) error {
	ctx := context.Background()
	srv, err := moto.Start(ctx)
	if err != nil {
		return err
	}
	defer srv.Stop()
	res, err := drainTargets(ctx, srv.URL, rows)
	if err != nil {
		return err
	}
	var sec strings.Builder
	writeTargets(func(format string, args ...any) { fmt.Fprintf(&sec, format+"\n", args...) }, res)
	fmt.Fprintf(&sec, "This section comes from `go run ./cmd/outflow-bench -only targets` (%s), not from the rest of this page's run.\n\n", time.Now().UTC().Format("2006-01-02"))
	fmt.Print(sec.String())
	path := filepath.Join(out, "benchmarks.md")
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	doc := spliceSection(string(b), targetsHeading, sec.String(), "## Cost per million messages\n")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		return err
	}
	logf("wrote the targets section of %s", path)
	return nil
}

// drainTargets runs bench.DrainTargets, logging each target.
func drainTargets(ctx context.Context, endpoint string, rows int) ([]bench.TargetResult, error) {
	logf("moto: draining %d rows to each target (%s)", rows, strings.Join(kindNames(), ", "))
	return bench.DrainTargets(ctx, endpoint, rows, bench.PayloadBytes)
}

func kindNames() []string {
	names := make([]string, len(bench.TargetKinds))
	for i, k := range bench.TargetKinds {
		names[i] = k.String()
	}
	return names
}

// writeTargets writes the section on requests per message by target, SQS
// first as the baseline.
func writeTargets(w func(string, ...any), res []bench.TargetResult) {
	w("%s", strings.TrimSuffix(targetsHeading, "\n"))
	w("")
	base := res[0]
	w("%d rows of %d-byte JSON payloads to each kind of target in turn, each on its own table with one route: an SQS queue (the baseline); an SNS topic with a queue subscribed with raw message delivery; an EventBridge bus (route options `source` and `detail-type`) with a rule sending every event to a queue. Rows are staged with the producer, checked against the route, then drained by one sweep (default policy), its requests counted by the SDK middleware as above; a consumer on its own uncounted client reads every row back from the queue behind the target. Each target takes up to %d entries per request (SendMessageBatch, PublishBatch, PutEvents).",
		base.Rows, base.PayloadSize, delivery.MaxBatchEntries)
	w("")
	header, rule := "| per message |", "| --- |"
	for i, r := range res {
		name := r.Kind.String()
		if i == 0 {
			name += " (baseline)"
		}
		header += " " + name + " |"
		rule += " --- |"
	}
	w("%s", header)
	w("%s", rule)
	row := func(label string, cell func(bench.TargetResult) string) {
		line := "| " + label + " |"
		for _, r := range res {
			line += " " + cell(r) + " |"
		}
		w("%s", line)
	}
	row("send requests", func(r bench.TargetResult) string {
		return fmt.Sprintf("%.3f (`%s`)", r.SendPerMessage(), strings.SplitN(bench.SendOp[r.Kind], ".", 2)[1])
	})
	row("send requests, against SQS", func(r bench.TargetResult) string {
		return fmt.Sprintf("%.2f×", r.SendPerMessage()/base.SendPerMessage())
	})
	row("DynamoDB requests", func(r bench.TargetResult) string { return fmt.Sprintf("%.3f", r.DynamoDBPerMessage(false)) })
	row("DynamoDB write requests", func(r bench.TargetResult) string { return fmt.Sprintf("%.3f", r.DynamoDBPerMessage(true)) })
	row("due-index queries", func(r bench.TargetResult) string {
		return fmt.Sprintf("%.3f", float64(r.Dispatch.Count("DynamoDB.Query"))/float64(max(r.Throughput.Rows, 1)))
	})
	w("| rows delivered / read back | %s |", strings.Join(mapResults(res, func(r bench.TargetResult) string {
		return fmt.Sprintf("%d / %d", r.Throughput.Rows, r.Arrived)
	}), " | "))
	w("| rows/s against moto | %s |", strings.Join(mapResults(res, func(r bench.TargetResult) string {
		return fmt.Sprintf("%.0f", r.Throughput.RowsPerS)
	}), " | "))
	w("")
}

func mapResults(res []bench.TargetResult, f func(bench.TargetResult) string) []string {
	out := make([]string, len(res))
	for i, r := range res {
		out[i] = f(r)
	}
	return out
}

// spliceSection replaces the section of doc that opens with heading (up to
// the next "## " heading) with sec. A doc without it gets sec before the
// section opening with before, or at its end when before is not in doc
// either.
func spliceSection(doc, heading, sec, before string) string {
	if i := strings.Index(doc, heading); i >= 0 {
		end := len(doc)
		if j := strings.Index(doc[i+len(heading):], "\n## "); j >= 0 {
			end = i + len(heading) + j + 1
		}
		return doc[:i] + sec + doc[end:]
	}
	if i := strings.Index(doc, before); i >= 0 && before != "" {
		return doc[:i] + sec + doc[i:]
	}
	if !strings.HasSuffix(doc, "\n\n") {
		doc = strings.TrimRight(doc, "\n") + "\n\n"
	}
	return doc + sec
}
