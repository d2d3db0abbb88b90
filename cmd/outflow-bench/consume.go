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
	"github.com/outflowhq/outflow/internal/moto"
)

// consumeMessages is how many messages each consume mode applies.
var consumeMessages = flag.Int("consume-messages", 200, "messages each consume mode (package consume) applies against moto")

// consumeHeading opens the consume section of benchmarks.md; `-only
// consume` replaces the section under it.
const consumeHeading = "## Write units per message by consume mode (moto)\n"

// runConsumeOnly measures the consume modes against a moto server of its
// own and splices the section into out/benchmarks.md.
func runConsumeOnly(out string, n int) error {
	ctx := context.Background()
	srv, err := moto.Start(ctx)
	if err != nil {
		return err
	}
	defer srv.Stop()
	modes, err := bench.ConsumeModes(ctx, srv.URL, n)
	if err != nil {
		return err
	}
	var sec strings.Builder
	writeConsume(func(format string, args ...any) { fmt.Fprintf(&sec, format+"\n", args...) }, n, modes)
	fmt.Fprintf(&sec, "This section comes from `go run ./cmd/outflow-bench -only consume` (%s), not from the rest of this page's run.\n\n", time.Now().UTC().Format("2006-01-02"))
	fmt.Print(sec.String())
	path := filepath.Join(out, "benchmarks.md")
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	doc := spliceSection(string(b), consumeHeading, sec.String(), "## Cost per million messages\n")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		return err
	}
	logf("wrote the consume section of %s", path)
	return nil
}

// writeConsume writes the consume section: what each mode of package
// consume writes per message.
func writeConsume(w func(string, ...any), n int, modes []bench.ConsumeMode) {
	w("%s", strings.TrimSuffix(consumeHeading, "\n"))
	w("")
	w("%d messages (first copies) applied in each mode of package `consume` against moto, the writes recorded by the SDK middleware and priced by the rules above (each write ceil(item size / 1 KB), twice that inside a transaction; the consumer's table has no index). The effect is one small item's update: alone, as a plain UpdateItem; with an `Inbox`, in one TransactWriteItems with the inbox put (and on an ordered route the group cursor's update, groups of %d). `Idempotency` guards an effect outside DynamoDB, so it adds its records alone. Refused copies (duplicates, not their turn) are not counted.", n, bench.ConsumeGroupSize)
	w("")
	w("| mode | WCU per message | adds to the effect alone | write requests per message |")
	w("| --- | --- | --- | --- |")
	for i, m := range modes {
		adds := fmt.Sprintf("%.2f", m.Adds)
		if i == 0 {
			adds = "(baseline)"
		}
		w("| %s | %.2f | %s | %.2f |", m.Name, m.WCU, adds, m.Writes)
	}
	w("")
}
