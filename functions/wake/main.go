// Command wake is the DynamoDB-stream Lambda: it delivers newly inserted
// rows at once. Everything but wiring lives in internal/handler.
package main

import (
	"fmt"
	"os"

	"github.com/outflowhq/outflow/internal/handler"
)

func main() {
	err := handler.Serve(func(rt *handler.Runtime) any { return handler.NewWake(rt).Handle })
	fmt.Fprintln(os.Stderr, "outflow wake init:", err)
	os.Exit(1)
}
