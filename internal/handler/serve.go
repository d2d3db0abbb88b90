package handler

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/outflowhq/outflow/internal/sdkhttp"
	"github.com/outflowhq/outflow/internal/telemetry"
)

// Serve is a function's whole life: at cold start it loads the AWS
// configuration and Setup from the process environment, then hands the
// handler newHandler builds to the Lambda runtime, which never returns.
// Serve returns only the error that failed the init, which it has logged
// to stdout as JSON at ERROR (so it survives every log level).
func Serve(newHandler func(*Runtime) any) error {
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		err = fmt.Errorf("load aws config: %w", err)
		telemetry.NewLogger(os.Stdout, os.Getenv).Error("init failed", "error", err.Error())
		return err
	}
	// sdkhttp: a request the server answered is not sent again. Wrapped
	// after loading: the loader adds a custom CA bundle only to its own
	// client type.
	cfg.HTTPClient = sdkhttp.Client(cfg.HTTPClient)
	rt, err := Setup(cfg, os.Getenv, os.Stdout)
	if err != nil {
		return err
	}
	lambda.Start(newHandler(rt))
	return nil
}
