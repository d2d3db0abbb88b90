"""A Lambda SQS handler with FIFO-safe partial batch responses (Go's
consume.Handler), and a record handler for AWS Lambda Powertools' batch
utilities."""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ._decode import GROUP_ATTRIBUTE, from_lambda
from ._message import ConsumeError, DuplicateError, LateError, Message, NoClosedHookError, SkippedError
from ._outcome import METRIC_NAMESPACE, Counts, Result, batch_metrics_line, outcome_of

ApplyFunc = Callable[[Message], None]
ResultHook = Callable[[Result], None]

#: The metric counted, in CloudWatch embedded metric format, for each
#: closing message that met no closed hook (Go's consume.MetricNoClosedHook).
METRIC_NO_CLOSED_HOOK = "ClosingMessagesWithoutHook"

_log = logging.getLogger("outflowhq.consume")


def ack_closed(m: Message) -> None:
    """The closed hook of a consumer that keeps no order: it acknowledges
    a message that closes a place unread, and says so in the code, where
    a missing hook said nothing (Go's consume.AckClosed)."""


def run_message(m: Message, apply: ApplyFunc, closed: ApplyFunc | None) -> Exception | None:
    """Give m to apply, or a message that closes a place to closed (a
    NoClosedHookError when closed is None), and return what it raised
    (None: it returned), for outcome_of to judge. Handler, Poller and
    record_handler share it, so all three give a message to the same hook
    and judge the same outcome."""
    try:
        if not m.closed:
            apply(m)
        elif closed is not None:
            closed(m)
        else:
            raise NoClosedHookError(
                f"message {m.key}, place {m.seq} of group {m.group!r}, closed ({m.closed}): "
                "a message that closes a place reached a consumer with no closed hook: "
                "set closed to your Inbox's close, or to ack_closed if this consumer keeps no order"
            )
    except Exception as e:
        return e
    return None


def apply_message(m: Message, apply: ApplyFunc, closed: ApplyFunc | None) -> None:
    """Give m to apply, or a message that closes a place to closed (a
    NoClosedHookError when closed is None). Returns when the message is
    done: applied, a duplicate, or recorded late; raises otherwise."""
    error = run_message(m, apply, closed)
    if error is not None and not isinstance(error, (DuplicateError, LateError)):
        raise error


def _queue_name(arn: object) -> str:
    text = arn if isinstance(arn, str) else ""
    return text.rsplit(":", 1)[-1].rsplit("/", 1)[-1]


def loud(error: BaseException, queue: str, message_id: str, logger: logging.Logger | None = None,
         metrics: Callable[[str], None] | None = None) -> None:
    """Make a wiring mistake impossible to miss: a NoClosedHookError is
    logged at ERROR with the queue and the fix, and counted as one
    ClosingMessagesWithoutHook in an EMF line (printed to standard output
    by default, where Lambda reads metrics from). Other errors pass."""
    if not isinstance(error, NoClosedHookError):
        return
    (logger or _log).error("closing message not acknowledged: no closed hook: queue=%s message_id=%s: %s", queue, message_id, error)
    doc = {
        "_aws": {
            "Timestamp": int(time.time() * 1000),
            "CloudWatchMetrics": [{"Namespace": METRIC_NAMESPACE, "Dimensions": [["Queue"]],
                                   "Metrics": [{"Name": METRIC_NO_CLOSED_HOOK, "Unit": "Count"}]}],
        },
        METRIC_NO_CLOSED_HOOK: 1,
        "Queue": queue,
        "message_id": message_id,
        "cause": "a message that closes a place reached a consumer with no closed hook",
    }
    _emit(json.dumps(doc), metrics)


def _fifo(record: Mapping[str, Any]) -> bool:
    """Whether the record's queue keeps an order: its ARN says .fifo."""
    arn = record.get("eventSourceARN")
    return isinstance(arn, str) and arn.endswith(".fifo")


def _decoded(record: Mapping[str, Any]) -> Message | None:
    """The record decoded, for the Result of a record that was not
    started; None if it cannot be (its outcome is skipped all the same:
    it was not tried)."""
    try:
        return from_lambda(record)
    except Exception:
        return None


@dataclass
class Handler:
    """A Lambda function for an SQS event source mapping with
    ReportBatchItemFailures on: ``handler.handle(event, context)`` applies
    each message and returns ``{"batchItemFailures": [...]}``.

    On a FIFO queue (the record's eventSourceARN ends in .fifo), once a
    message of a group fails, every later message of that group in the
    batch is reported failed without being applied, so the group is
    retried from its first failure, in order. On any other queue each
    message stands alone, whatever group it carries.

    Each message's outcome goes to on_result, and each batch's outcomes
    are counted in one EMF line on metrics (namespace Outflow/Consumer,
    dimension Queue, metrics Applied, Duplicate, Late, Closed, Gap, Failed
    and Skipped), so that what a batch acknowledged without applying is
    seen, not swallowed. ``Inbox.handler(effect)`` makes one wired to an
    Inbox.
    """

    #: Applies one message: return (or raise DuplicateError, LateError)
    #: when done; raise anything else to have it retried.
    apply: ApplyFunc
    #: Given each message that closes a place: an Inbox's close, or
    #: ack_closed for a consumer that keeps no order. None reports such a
    #: message failed with NoClosedHookError, logs it at ERROR and counts
    #: it (METRIC_NO_CLOSED_HOOK): never acknowledged unread, which would
    #: stall an Inbox's group in silence.
    closed: ApplyFunc | None = None
    #: Told of each message reported failed and why (a SkippedError for
    #: one not started), for logging: the response carries only ids.
    on_failure: Callable[[str, BaseException], None] | None = None
    #: With a Lambda context, the messages not started when fewer than
    #: this many milliseconds remain are reported failed unapplied.
    reserve_ms: int = 0
    #: Where a closing message that met no closed hook is logged (None:
    #: the "outflowhq.consume" logger), and where it and each batch's
    #: outcomes are counted (None: an EMF line on standard output, where
    #: Lambda reads metrics from).
    logger: logging.Logger | None = None
    metrics: Callable[[str], None] | None = None
    #: Told what became of each message of a batch, in the batch's order
    #: (a Counts' add counts them). What it raises fails the invocation,
    #: as an on_failure that raises does.
    on_result: ResultHook | None = None

    def handle(self, event: Mapping[str, Any], context: Any = None) -> dict[str, list[dict[str, str]]]:
        failures: list[dict[str, str]] = []
        failed_groups: set[str] = set()
        counts = Counts()
        records = list(event.get("Records") or [])

        def report(record: Mapping[str, Any], message: Message | None, error: BaseException | None) -> None:
            message_id = str(record.get("messageId", ""))
            outcome = outcome_of(message, error)
            if not outcome.done:
                failures.append({"itemIdentifier": message_id})
                assert error is not None
                loud(error, _queue_name(record.get("eventSourceARN")), message_id, self.logger, self.metrics)
                if self.on_failure is not None:
                    self.on_failure(message_id, error)
            result = Result(message_id, message, outcome, error)
            counts.add(result)
            if self.on_result is not None:
                self.on_result(result)

        for record in records:
            group = ""
            if _fifo(record):
                group = str((record.get("attributes") or {}).get(GROUP_ATTRIBUTE) or "")
            if group and group in failed_groups:
                report(record, _decoded(record), SkippedError("not applied: an earlier message of its group failed"))
                continue
            remaining = getattr(context, "get_remaining_time_in_millis", None)
            if callable(remaining) and remaining() <= self.reserve_ms:
                report(record, _decoded(record), SkippedError("not applied: the invocation is out of time"))
                continue
            message: Message | None = None
            error: BaseException | None
            try:
                message = from_lambda(record)
            except Exception as e:
                error = e
            else:
                error = run_message(message, self.apply, self.closed)
            report(record, message, error)
            if not outcome_of(message, error).done and group:
                failed_groups.add(group)
        if records:
            _emit(batch_metrics_line(_queue_name(records[0].get("eventSourceARN")), counts), self.metrics)
        return {"batchItemFailures": failures}

    __call__ = handle


def _emit(line: str, metrics: Callable[[str], None] | None) -> None:
    """Write an EMF line to metrics, or to standard output, where Lambda
    reads metrics from."""
    if metrics is not None:
        metrics(line)
    else:
        print(line, file=sys.stdout, flush=True)


def record_handler(apply: ApplyFunc, closed: ApplyFunc | None = None, *, logger: logging.Logger | None = None,
                   metrics: Callable[[str], None] | None = None, on_result: ResultHook | None = None) -> Callable[[Any], None]:
    """A record handler for AWS Lambda Powertools' batch utilities
    (process_partial_response with SqsFifoPartialProcessor or
    BatchProcessor(EventType.SQS)): it decodes the record (a Powertools
    SQSRecord or the raw record dict), applies it, returns when it is done
    (duplicates and late records included) and raises to report it failed.
    See python/README.md for which processor keeps a FIFO group's order.

    on_result is told what became of each record it is given. The records
    Powertools does not give it (those it fails behind a failure of their
    FIFO group) never reach it: they are not reported skipped, and no
    per-batch metrics line is written, since a record handler never sees
    the batch."""

    def handle(record: Any) -> None:
        raw = getattr(record, "raw_event", record)
        if not isinstance(raw, Mapping):
            raise ConsumeError("record_handler: not an SQS record")
        message_id = str(raw.get("messageId", ""))
        message: Message | None = None
        error: Exception | None
        try:
            message = from_lambda(raw)
        except Exception as e:
            error = e
        else:
            error = run_message(message, apply, closed)
        outcome = outcome_of(message, error)
        if isinstance(error, NoClosedHookError):
            loud(error, _queue_name(raw.get("eventSourceARN")), message_id, logger, metrics)
        if on_result is not None:
            on_result(Result(message_id, message, outcome, error))
        if error is not None and not outcome.done:
            raise error

    return handle
