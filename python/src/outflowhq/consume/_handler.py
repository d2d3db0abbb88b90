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

ApplyFunc = Callable[[Message], None]

#: The metric counted, in CloudWatch embedded metric format, for each
#: closing message that met no closed hook (Go's consume.MetricNoClosedHook).
METRIC_NO_CLOSED_HOOK = "ClosingMessagesWithoutHook"
#: The namespace of the consumer's metrics (Go's consume.MetricNamespace).
METRIC_NAMESPACE = "Outflow/Consumer"

_log = logging.getLogger("outflowhq.consume")


def ack_closed(m: Message) -> None:
    """The closed hook of a consumer that keeps no order: it acknowledges
    a message that closes a place unread, and says so in the code, where
    a missing hook said nothing (Go's consume.AckClosed)."""


def apply_message(m: Message, apply: ApplyFunc, closed: ApplyFunc | None) -> None:
    """Give m to apply, or a message that closes a place to closed (a
    NoClosedHookError when closed is None). Returns when the message is
    done: applied, a duplicate, or recorded late; raises otherwise."""
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
    except (DuplicateError, LateError):
        return


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
    line = json.dumps(doc)
    if metrics is not None:
        metrics(line)
    else:
        print(line, file=sys.stdout, flush=True)


def _fifo(record: Mapping[str, Any]) -> bool:
    """Whether the record's queue keeps an order: its ARN says .fifo."""
    arn = record.get("eventSourceARN")
    return isinstance(arn, str) and arn.endswith(".fifo")


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
    #: Told of each message reported failed and why.
    on_failure: Callable[[str, BaseException], None] | None = None
    #: With a Lambda context, the messages not started when fewer than
    #: this many milliseconds remain are reported failed unapplied.
    reserve_ms: int = 0
    #: Where a closing message that met no closed hook is logged (None:
    #: the "outflowhq.consume" logger) and counted (None: an EMF line on
    #: standard output).
    logger: logging.Logger | None = None
    metrics: Callable[[str], None] | None = None

    def handle(self, event: Mapping[str, Any], context: Any = None) -> dict[str, list[dict[str, str]]]:
        failures: list[dict[str, str]] = []
        failed_groups: set[str] = set()

        def fail(message_id: str, error: BaseException, queue: str = "") -> None:
            failures.append({"itemIdentifier": message_id})
            loud(error, queue, message_id, self.logger, self.metrics)
            if self.on_failure is not None:
                self.on_failure(message_id, error)

        for record in event.get("Records") or []:
            message_id = str(record.get("messageId", ""))
            group = ""
            if _fifo(record):
                group = str((record.get("attributes") or {}).get(GROUP_ATTRIBUTE) or "")
            if group and group in failed_groups:
                fail(message_id, SkippedError("not applied: an earlier message of its group failed"))
                continue
            remaining = getattr(context, "get_remaining_time_in_millis", None)
            if callable(remaining) and remaining() <= self.reserve_ms:
                fail(message_id, SkippedError("not applied: the invocation is out of time"))
                continue
            try:
                apply_message(from_lambda(record), self.apply, self.closed)
            except Exception as e:
                fail(message_id, e, _queue_name(record.get("eventSourceARN")))
                if group:
                    failed_groups.add(group)
        return {"batchItemFailures": failures}

    __call__ = handle


def record_handler(apply: ApplyFunc, closed: ApplyFunc | None = None, *, logger: logging.Logger | None = None,
                   metrics: Callable[[str], None] | None = None) -> Callable[[Any], None]:
    """A record handler for AWS Lambda Powertools' batch utilities
    (process_partial_response with SqsFifoPartialProcessor or
    BatchProcessor(EventType.SQS)): it decodes the record (a Powertools
    SQSRecord or the raw record dict), applies it, returns when it is done
    (duplicates and late records included) and raises to report it failed.
    See python/README.md for which processor keeps a FIFO group's order."""

    def handle(record: Any) -> None:
        raw = getattr(record, "raw_event", record)
        if not isinstance(raw, Mapping):
            raise ConsumeError("record_handler: not an SQS record")
        try:
            apply_message(from_lambda(raw), apply, closed)
        except NoClosedHookError as e:
            loud(e, _queue_name(raw.get("eventSourceARN")), str(raw.get("messageId", "")), logger, metrics)
            raise

    return handle
