// Command sweep is the scheduled Lambda: one sweep of due rows per
// invocation. Everything but wiring lives in internal/handler.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/outflowhq/outflow/internal/handler"
)

func main() {
	rt, err := handler.Setup(context.Background(), os.Getenv, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "outflow sweep init:", err)
		os.Exit(1)
	}
	lambda.Start(handler.NewSweep(rt).Handle)
}
