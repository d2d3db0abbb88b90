// Command wake is the DynamoDB-stream Lambda: it delivers newly inserted
// rows at once. Everything but wiring lives in internal/handler.
package main

import (
	"os"

	"github.com/outflowhq/outflow/internal/handler"
)

func main() {
	// Serve returns only when the init failed, and has logged why.
	_ = handler.Serve(func(rt *handler.Runtime) any { return handler.NewWake(rt).Handle })
	os.Exit(1)
}
