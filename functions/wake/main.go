// Command wake is the DynamoDB-stream Lambda: it delivers newly inserted
// rows at once. Everything but wiring lives in internal/handler.
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
		fmt.Fprintln(os.Stderr, "outflow wake init:", err)
		os.Exit(1)
	}
	lambda.Start(handler.NewWake(rt).Handle)
}
