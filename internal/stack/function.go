package stack

import (
	"encoding/json"
	"fmt"
)

// Function is an AWS::Serverless::Function's properties (Globals merged),
// as far as Outflow uses them.
type Function struct {
	FunctionName  string
	CodeUri       string
	Runtime       string
	Handler       string
	Architectures []string
	Timeout       int
	MemorySize    int
	// ReservedConcurrentExecutions is a number, or a numeric string when
	// it comes from a String parameter (CloudFormation takes either).
	ReservedConcurrentExecutions *json.Number
	Role                         string
	Environment                  struct{ Variables map[string]string }
	LoggingConfig                struct{ LogFormat, ApplicationLogLevel, LogGroup string }
	// EventInvokeConfig governs the function's asynchronous invokes.
	EventInvokeConfig struct{ MaximumRetryAttempts, MaximumEventAgeInSeconds *int }
	Events            map[string]Event
}

// Event is one event source of a function. Properties are kept raw; the
// typed views below read the ones Outflow uses.
type Event struct {
	Type       string
	Properties map[string]any
}

// StreamEvent is a DynamoDB event source's properties.
type StreamEvent struct {
	Stream                         string
	StartingPosition               string
	Enabled                        *bool
	BatchSize                      int
	MaximumBatchingWindowInSeconds int
	ParallelizationFactor          int
	MaximumRetryAttempts           int
	MaximumRecordAgeInSeconds      int
	FilterCriteria                 struct{ Filters []struct{ Pattern string } }
}

// ScheduleEvent is a ScheduleV2 event source's properties.
type ScheduleEvent struct {
	ScheduleExpression string
	State              string
}

// Function decodes the serverless function with the given logical name.
func (t *Template) Function(logical string) (Function, error) {
	var f Function
	r, ok := t.Resources[logical]
	if !ok || r.Type != "AWS::Serverless::Function" {
		return f, fmt.Errorf("no AWS::Serverless::Function named %s in the template", logical)
	}
	if err := r.Decode(&f); err != nil {
		return f, fmt.Errorf("function %s: %w", logical, err)
	}
	return f, nil
}

// Event decodes the properties of the function's only event of type typ
// into v.
func (f Function) Event(typ string, v any) error {
	found := 0
	for _, ev := range f.Events {
		if ev.Type == typ {
			found++
			if err := remarshal(ev.Properties, v); err != nil {
				return fmt.Errorf("%s event of %s: %w", typ, f.FunctionName, err)
			}
		}
	}
	if found != 1 {
		return fmt.Errorf("%s has %d events of type %s, want 1", f.FunctionName, found, typ)
	}
	return nil
}
