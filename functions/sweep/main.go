// Command sweep is the scheduled Lambda: one sweep of due rows per
// invocation. Everything but wiring lives in internal/handler.
package main

import (
	"fmt"
	"os"

	"github.com/outflowhq/outflow/internal/handler"
)

func main() {
	err := handler.Serve(func(rt *handler.Runtime) any { return handler.NewSweep(rt).Handle })
	fmt.Fprintln(os.Stderr, "outflow sweep init:", err)
	os.Exit(1)
}
