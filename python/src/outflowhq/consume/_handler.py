"""A Lambda SQS handler with FIFO-safe partial batch responses (Go's
consume.Handler), and a record handler for AWS Lambda Powertools' batch
utilities."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ._decode import GROUP_ATTRIBUTE, from_lambda
from ._message import ConsumeError, DuplicateError, LateError, Message, SkippedError

ApplyFunc = Callable[[Message], None]


def apply_message(m: Message, apply: ApplyFunc, closed: ApplyFunc | None) -> None:
    """Give m to apply, or a message that closes a place to closed
    (acknowledged unread when closed is None). Returns when the message is
    done: applied, a duplicate, or recorded late; raises otherwise."""
    try:
        if not m.closed:
            apply(m)
        elif closed is not None:
            closed(m)
    except (DuplicateError, LateError):
        return


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
    #: Given each message that closes a place: an Inbox's close. None
    #: acknowledges them unread.
    closed: ApplyFunc | None = None
    #: Told of each message reported failed and why.
    on_failure: Callable[[str, BaseException], None] | None = None
    #: With a Lambda context, the messages not started when fewer than
    #: this many milliseconds remain are reported failed unapplied.
    reserve_ms: int = 0

    def handle(self, event: Mapping[str, Any], context: Any = None) -> dict[str, list[dict[str, str]]]:
        failures: list[dict[str, str]] = []
        failed_groups: set[str] = set()

        def fail(message_id: str, error: BaseException) -> None:
            failures.append({"itemIdentifier": message_id})
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
                fail(message_id, e)
                if group:
                    failed_groups.add(group)
        return {"batchItemFailures": failures}

    __call__ = handle


def record_handler(apply: ApplyFunc, closed: ApplyFunc | None = None) -> Callable[[Any], None]:
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
        apply_message(from_lambda(raw), apply, closed)

    return handle
