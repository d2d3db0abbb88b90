package stack

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"os/exec"

	"github.com/outflowhq/outflow/internal/child"
)

//go:embed translate.py
var translateScript string

// Translate returns the CloudFormation JSON that SAM's own translator (the
// samtranslator package `sam validate` and `sam deploy` use) makes of the
// template at path, offline. It runs the project's Python (.venv/bin/python,
// or $OUTFLOW_PYTHON), so tests can check what CloudFormation will really
// be asked to create: generated resources, names and properties.
func Translate(ctx context.Context, path string) ([]byte, error) {
	python, ok := child.FindTool("OUTFLOW_PYTHON", ".venv/bin/python")
	if !ok {
		return nil, fmt.Errorf("translate %s: no .venv/bin/python (run make venv) and OUTFLOW_PYTHON is not set", path)
	}
	var out, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, python, "-c", translateScript, path)
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("translate %s: %w\n%s", path, err, stderr.String())
	}
	return out.Bytes(), nil
}

// Parse resolves a template given as bytes (YAML, or JSON such as
// Translate's output); overrides replace parameter defaults.
func Parse(raw []byte, overrides map[string]string) (*Template, error) {
	return parse(raw, "template", overrides)
}
