package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/outflowhq/outflow/internal/bench"
	"github.com/outflowhq/outflow/internal/moto"
)

// The -only backstop flags: the table the pass is measured on.
var (
	backstopPayload = flag.Int("backstop-payload", bench.PayloadBytes, "payload bytes of each row of -only backstop's table")
	backstopTable   = flag.Int("backstop-items", backstopItems, "items in -only backstop's table, "+fmt.Sprint(backstopMissed)+" of them missed lean rows")
)

// runBackstopOnly is -only backstop: the lean backstop's pass over a table
// of tombstones and missed rows (as the cost section builds it, at the
// payload size asked for), on a new moto server, printed.
func runBackstopOnly(items, payloadBytes int) error {
	ctx := context.Background()
	srv, err := moto.Start(ctx)
	if err != nil {
		return err
	}
	defer srv.Stop()
	logf("backstop: %d items (%d missed), %d-byte payloads", items, backstopMissed, payloadBytes)
	m, err := bench.MeasureBackstopOf(ctx, srv.URL, items-backstopMissed, backstopMissed, payloadBytes)
	if err != nil {
		return err
	}
	writeBackstop(func(format string, args ...any) { fmt.Printf(format+"\n", args...) }, m, payloadBytes)
	return nil
}

// writeBackstop writes a measured pass as a table row, with the full
// page's read units at its mean item size.
func writeBackstop(w func(string, ...any), m bench.BackstopMeasure, payloadBytes int) {
	l := leanPath{backstop: m}
	md := l.model(m.Items)
	w("| payload | items evaluated | mean item | runs | pages | read units, the pass | per item | a full page of %s | missed rows found | moto's time |", num(md.ItemsPerPage()))
	w("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	w("| %s bytes | %s | %.1f bytes | %d | %d | %s | %.4f | %.2f | %d of %d | %s |", num(payloadBytes), num(m.Items), m.ItemBytes, len(m.Runs), m.Pages(),
		numf(m.RRU()), md.RRUPerItem, bench.ScanRRU(int(m.ItemBytes*float64(md.ItemsPerPage())), false), m.Found(), m.Missed, m.Elapsed().Round(time.Millisecond))
}
