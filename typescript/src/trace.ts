/** The current trace context, as Go's outflow.TraceParent finds it. */

import { createRequire } from "node:module";
import { traceParentFromXray } from "./target.js";

interface SpanContext {
  traceId: string;
  spanId: string;
  traceFlags: number;
}

interface OpenTelemetryApi {
  trace: { getActiveSpan(): { spanContext(): SpanContext } | undefined };
  isSpanContextValid(ctx: SpanContext): boolean;
}

let otel: OpenTelemetryApi | null | undefined;

/** @opentelemetry/api when the application has it (it is optional), else null. */
function openTelemetry(): OpenTelemetryApi | null {
  if (otel === undefined) {
    otel = null;
    // This package's own resolution first, then the application's (a
    // package installed as a link resolves from its own folder).
    for (const from of [import.meta.url, process.cwd() + "/"]) {
      try {
        otel = createRequire(from)("@opentelemetry/api") as OpenTelemetryApi;
        break;
      } catch {
        // not installed there
      }
    }
  }
  return otel;
}

/**
 * The W3C traceparent of the active OpenTelemetry span, when there is a
 * valid one, else of the X-Ray trace header Lambda gives a traced invocation
 * (_X_AMZN_TRACE_ID), converted; "" when there is neither.
 */
export function currentTraceParent(): string {
  const api = openTelemetry();
  const ctx = api?.trace.getActiveSpan()?.spanContext();
  if (api && ctx && api.isSpanContextValid(ctx)) {
    return `00-${ctx.traceId}-${ctx.spanId}-${(ctx.traceFlags & 0xff).toString(16).padStart(2, "0")}`;
  }
  const header = process.env["_X_AMZN_TRACE_ID"] ?? "";
  return header ? traceParentFromXray(header) : "";
}
