package local

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/outflowhq/outflow/internal/config"
	"github.com/outflowhq/outflow/internal/handler"
	"github.com/outflowhq/outflow/internal/rie"
)

// function is one Lambda function as the runner invokes it: JSON in, JSON
// out, within the function's timeout.
type function interface {
	invoke(ctx context.Context, payload []byte) ([]byte, error)
	stop()
}

// inProcess calls the handler code directly, as the Lambda runtime would.
type inProcess struct {
	call    func(ctx context.Context, payload []byte) (any, error)
	timeout time.Duration
}

func (f inProcess) invoke(ctx context.Context, payload []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	out, err := f.call(ctx, payload)
	if err != nil {
		return nil, err
	}
	return json.Marshal(out)
}

func (inProcess) stop() {}

// newInProcess builds the named function's runtime from its environment;
// inv, if not nil, is the sweep's Invoker for its partitions (in Lambda,
// Setup builds one from AWS_LAMBDA_FUNCTION_NAME).
func newInProcess(name string, awsCfg aws.Config, env map[string]string, timeout time.Duration, logs io.Writer, inv handler.Invoker) (function, error) {
	rt, err := handler.Setup(awsCfg, func(k string) string { return env[k] }, logs)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if inv != nil {
		rt.Invoker = inv
	}
	f := inProcess{timeout: timeout}
	switch name {
	case "SweepFunction":
		sweep := handler.NewSweep(rt)
		f.call = func(ctx context.Context, p []byte) (any, error) { return sweep.Handle(ctx, p) }
	case "WakeFunction":
		wake := handler.NewWake(rt)
		f.call = func(ctx context.Context, p []byte) (any, error) {
			var ev events.DynamoDBEvent
			if err := json.Unmarshal(p, &ev); err != nil {
				return nil, err
			}
			return wake.Handle(ctx, ev)
		}
	default:
		return nil, fmt.Errorf("no handler for function %s", name)
	}
	return f, nil
}

// emulated runs a built bootstrap under the Runtime Interface Emulator.
type emulated struct{ emu *rie.Emulator }

func (f emulated) invoke(ctx context.Context, payload []byte) ([]byte, error) {
	return f.emu.Invoke(ctx, payload)
}

func (f emulated) stop() { f.emu.Stop() }

// newEmulated starts bootstraps/<fn>/bootstrap (fn is sweep or wake) under
// the emulator with env and the function's timeout.
func newEmulated(name, bootstraps string, env map[string]string, timeout time.Duration, logs io.Writer) (function, *rie.Emulator, error) {
	// The emulator starts the bootstrap, and so its init, at the first
	// invoke; the configuration is checked now, as in process, so a bad one
	// fails Start with the same message rather than every invoke.
	if _, err := config.Load(func(k string) string { return env[k] }); err != nil {
		return nil, nil, fmt.Errorf("%s: invalid configuration: %w", name, err)
	}
	path, err := rie.Path()
	if err != nil {
		return nil, nil, err
	}
	dir := map[string]string{"SweepFunction": "sweep", "WakeFunction": "wake"}[name]
	if dir == "" {
		return nil, nil, fmt.Errorf("no bootstrap for function %s", name)
	}
	vars := []string{fmt.Sprintf("AWS_LAMBDA_FUNCTION_TIMEOUT=%d", int(timeout.Seconds()))}
	for k, v := range env {
		vars = append(vars, k+"="+v)
	}
	emu, err := rie.Start(path, filepath.Join(bootstraps, dir, "bootstrap"), vars, logs)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w (run `make build` first)", name, err)
	}
	return emulated{emu: emu}, emu, nil
}
