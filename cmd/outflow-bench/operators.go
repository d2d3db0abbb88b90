package main

import (
	"context"
	"os"
	"path/filepath"

	"github.com/outflowhq/outflow/internal/bench"
	"github.com/outflowhq/outflow/internal/moto"
)

// runOperators measures the operator commands at deadLetters dead letters
// against a moto server of its own and writes capacity-operators.md in
// out, the section the lead splices into docs/capacity.md.
func runOperators(out string, deadLetters int) error {
	ctx := context.Background()
	srv, err := moto.Start(ctx)
	if err != nil {
		return err
	}
	defer srv.Stop()
	res, err := bench.MeasureOperators(ctx, srv.URL, deadLetters, logf)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, "capacity-operators.md"), []byte(bench.RenderOperators(res)), 0o644)
}
