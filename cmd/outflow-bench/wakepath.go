package main

import (
	"context"
	"fmt"
	"time"

	"github.com/outflowhq/outflow/internal/bench"
	"github.com/outflowhq/outflow/internal/moto"
)

// wakePathRows is how many rows each wake-alone run of the wake path's
// write units stages.
const wakePathRows = 400

// wakePaths is the wake alone, four times over the same staging:
// claim-free (each row sent from its stream image, then one conditional
// settle), claimed (claim, send, done: the path before), and lean (rows
// staged with no shard, out of the due index, then sent claim-free), its
// settle keeping the row as done or deleting it.
type wakePaths struct{ free, claimed, lean, leanDelete bench.StreamResult }

// runWakePaths runs them against endpoint.
func runWakePaths(ctx context.Context, endpoint string, rows int) (wakePaths, error) {
	var w wakePaths
	for _, run := range []struct {
		name               string
		claimed, lean, del bool
		res                *bench.StreamResult
	}{
		{"claim-free", false, false, false, &w.free}, {"claimed", true, false, false, &w.claimed},
		{"lean", false, true, false, &w.lean}, {"lean, deleted", false, true, true, &w.leanDelete},
	} {
		logf("wake path: %d rows, wake alone, %s", rows, run.name)
		res, err := bench.RunStream(ctx, endpoint, bench.StreamConfig{
			Rows: rows, Stage: 5 * time.Second, Producers: 4, Shards: 8, Poll: 250 * time.Millisecond, BatchSize: 100,
			ClaimedWake: run.claimed, Lean: run.lean, DeleteDone: run.del, Timeout: 3 * time.Minute,
		})
		if err != nil {
			return w, fmt.Errorf("wake path run %s: %w", run.name, err)
		}
		*run.res = res
	}
	return w, nil
}

// wakeWCU is the write units per message the wake delivered, staging
// included, table and index, from the recorded writes.
func wakeWCU(r bench.StreamResult) float64 {
	return (r.Stage.WCU(bench.IndexWrites) + r.Wake.WCU(bench.IndexWrites)) / float64(max(r.WakeDelivered, 1))
}

// wakeWrites is the write requests per message the wake delivered,
// staging included.
func wakeWrites(r bench.StreamResult) float64 {
	return float64(r.Stage.Total("DynamoDB", true)+r.Wake.Total("DynamoDB", true)) / float64(max(r.WakeDelivered, 1))
}

// wakeIndexWCU is the due-index share of wakeWCU.
func wakeIndexWCU(r bench.StreamResult) float64 {
	none := map[string]int{}
	return wakeWCU(r) - (r.Stage.WCU(none)+r.Wake.WCU(none))/float64(max(r.WakeDelivered, 1))
}

// writeWakePaths writes the table of the paths.
func writeWakePaths(w func(string, ...any), p wakePaths) {
	w("| wake path (%d rows of %d-byte payloads, the wake alone) | WCU per message | of which due index | write requests per message | claims | unclaimed settles |", p.free.Rows, bench.PayloadBytes)
	w("| --- | --- | --- | --- | --- | --- |")
	for _, r := range []struct {
		name string
		res  bench.StreamResult
	}{
		{"**claim-free** (stage 2, settle 2)", p.free}, {"claimed (stage 2, claim 1, done 2)", p.claimed},
		{"**lean**, kept as done (stage 1, settle 1)", p.lean}, {"lean, deleted (stage 1, settle 1)", p.leanDelete},
	} {
		kinds := r.res.Wake.Writes()
		w("| %s | %.2f | %.2f | %.2f | %d | %d |", r.name, wakeWCU(r.res), wakeIndexWCU(r.res), wakeWrites(r.res), kinds["claim"], kinds["settle"])
	}
}

// runWakePathOnly is -only wakepath: both runs on a new moto server,
// printed.
func runWakePathOnly(rows int) error {
	ctx := context.Background()
	srv, err := moto.Start(ctx)
	if err != nil {
		return err
	}
	defer srv.Stop()
	p, err := runWakePaths(ctx, srv.URL, rows)
	if err != nil {
		return err
	}
	writeWakePaths(func(format string, args ...any) { fmt.Printf(format+"\n", args...) }, p)
	fmt.Printf("goal: at most 4.0 WCU per wake-delivered message: %s\n", verdict(wakeWCU(p.free) <= 4.0))
	fmt.Printf("goal: at most 2.0 WCU per lean message, none on the due index: %s\n", verdict(wakeWCU(p.lean) <= 2.0 && wakeIndexWCU(p.lean) == 0))
	return nil
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "missed"
}
