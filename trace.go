package outflow

import (
	"context"

	"go.opentelemetry.io/otel/trace"

	"github.com/outflowhq/outflow/internal/target"
)

// lambdaTraceKey is where aws-lambda-go keeps an invocation's X-Ray trace
// header in its context: a plain string key, as it sets it.
const lambdaTraceKey = "x-amzn-trace-id"

// TraceParent is the W3C traceparent of ctx: its OpenTelemetry span, when
// it has a valid one, else the X-Ray trace header Lambda gives a traced
// invocation, converted; "" when ctx carries neither. Put and
// TransactItems fill Row.TraceParent with it; call it to fill the field
// yourself for TransactItem.
func TraceParent(ctx context.Context) string {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		return "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-" + sc.TraceFlags().String()
	}
	if h, ok := ctx.Value(lambdaTraceKey).(string); ok {
		if tp, ok := target.TraceParentFromXRay(h); ok {
			return tp
		}
	}
	return ""
}
