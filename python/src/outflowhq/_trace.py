"""The current trace context, as Go's outflow.TraceParent finds it."""

from __future__ import annotations

import os
from typing import Any

from ._target import trace_parent_from_xray

import importlib

_otel: Any
try:  # OpenTelemetry is optional: used when the application has it.
    _otel = importlib.import_module("opentelemetry.trace")
except ImportError:  # pragma: no cover - depends on the environment
    _otel = None


def current_trace_parent() -> str:
    """The W3C traceparent of the current OpenTelemetry span, when there is
    a valid one, else of the X-Ray trace header Lambda gives a traced
    invocation (_X_AMZN_TRACE_ID), converted; "" when there is neither."""
    if _otel is not None:
        ctx = _otel.get_current_span().get_span_context()
        if ctx.is_valid:
            return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"
    header = os.environ.get("_X_AMZN_TRACE_ID", "")
    return trace_parent_from_xray(header) if header else ""
