// Command sweep is the scheduled Lambda: one sweep of due rows per
// invocation. Everything but wiring lives in internal/handler.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/outflowhq/outflow/internal/handler"
)

func main() {
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "outflow sweep init: load aws config:", err)
		os.Exit(1)
	}
	rt, err := handler.Setup(cfg, os.Getenv, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "outflow sweep init:", err)
		os.Exit(1)
	}
	lambda.Start(handler.NewSweep(rt).Handle)
}
