// Command sweep is the scheduled Lambda: one sweep of due rows per
// invocation. Everything but wiring lives in internal/handler.
package main

import (
	"os"

	"github.com/outflowhq/outflow/internal/handler"
)

func main() {
	// Serve returns only when the init failed, and has logged why.
	_ = handler.Serve(func(rt *handler.Runtime) any { return handler.NewSweep(rt).Handle })
	os.Exit(1)
}
