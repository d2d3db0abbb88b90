"""What became of each message a handler or a receive loop was given
(Go's consume.Outcome, Result and Counts): one classification, shared by
Handler, record_handler and Poller, so that every way of consuming
reports the same outcome for the same message, and nothing it skips or
swallows goes unseen."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from enum import StrEnum

from ._message import DuplicateError, LateError, Message, OrderError, SkippedError

#: The namespace of the consumer's metrics (Go's consume.MetricNamespace).
METRIC_NAMESPACE = "Outflow/Consumer"


class Outcome(StrEnum):
    """What became of one message, once per delivery (Go's
    consume.Outcome). The first four are done: acknowledged, the message
    deleted or left out of a Lambda batch's failures; the last three are
    not, and the message comes again. Iterating Outcome gives them in the
    order Counts and the EMF line list them."""

    #: Its effect committed.
    APPLIED = "applied"
    #: It closes a place, and the closed hook recorded it.
    CLOSED = "closed"
    #: Applied before (DuplicateError): acknowledged, not applied again.
    DUPLICATE = "duplicate"
    #: Its group went past it (LateError): recorded, not applied.
    LATE = "late"
    #: Not its group's turn yet (an OrderError for a gap): it comes again.
    GAP = "gap"
    #: It could not be decoded, its effect failed, or it closes a place
    #: and met no closed hook.
    FAILED = "failed"
    #: Not started: behind a failure or a gap of its FIFO group in the
    #: batch, or the handler or loop was stopped first.
    SKIPPED = "skipped"

    @property
    def done(self) -> bool:
        """Whether the message is acknowledged (Go's Outcome.Done):
        deleted from its queue, or left out of a Lambda batch's failures,
        never to come again."""
        return self in (Outcome.APPLIED, Outcome.CLOSED, Outcome.DUPLICATE, Outcome.LATE)

    @property
    def metric(self) -> str:
        """The metric a Handler's per-batch EMF line counts it by: its
        name with a capital, "Applied" for APPLIED (Go's MetricName)."""
        return self.value.capitalize()


@dataclass(frozen=True)
class Result:
    """What became of one message (Go's consume.Result), given to the
    on_result hook of a Handler, a Poller or a record_handler once per
    message per delivery."""

    #: The message's SQS message id.
    message_id: str
    #: The message, decoded; None when it could not be decoded (the
    #: outcome is then FAILED, and error the DecodeError).
    message: Message | None
    outcome: Outcome
    #: Why: None for APPLIED and CLOSED; the DuplicateError or LateError
    #: an acknowledged copy gave; the OrderError of a gap; the error of a
    #: failure; a SkippedError saying why a message was not started.
    error: BaseException | None = None


@dataclass
class Counts:
    """The outcomes added up: ``on_result=counts.add``. A Handler and a
    Poller call their hook one result at a time, never concurrently, so
    add needs no lock of its own there."""

    applied: int = 0
    closed: int = 0
    duplicate: int = 0
    late: int = 0
    gap: int = 0
    failed: int = 0
    skipped: int = 0

    def add(self, result: Result) -> None:
        """Count one result under its outcome."""
        name = Outcome(result.outcome).value
        setattr(self, name, getattr(self, name) + 1)

    def of(self, outcome: Outcome) -> int:
        """The count of one outcome (Go's Counts.Of)."""
        count: int = getattr(self, Outcome(outcome).value)
        return count

    @property
    def total(self) -> int:
        """Every result counted."""
        return sum(self.of(o) for o in Outcome)


def outcome_of(message: Message | None, error: BaseException | None) -> Outcome:
    """The outcome of giving a message to its hook, as Handler, Poller and
    record_handler all judge it: error is what the hook raised (None: it
    returned), or the DecodeError of a message that could not be decoded
    (message None), or the SkippedError of a message not started."""
    if error is None:
        return Outcome.CLOSED if message is not None and message.closed else Outcome.APPLIED
    if isinstance(error, DuplicateError):
        return Outcome.DUPLICATE
    if isinstance(error, LateError):
        return Outcome.LATE
    if isinstance(error, OrderError) and error.gap:
        return Outcome.GAP
    if isinstance(error, SkippedError):
        return Outcome.SKIPPED
    return Outcome.FAILED


def batch_metrics_line(queue: str, counts: Counts) -> str:
    """One CloudWatch embedded-metric-format line counting a batch's
    outcomes (namespace Outflow/Consumer, dimension Queue, one metric per
    outcome: Applied, Closed, Duplicate, Late, Gap, Failed, Skipped):
    every metric is present, 0 included, so a dashboard reads zeros as
    zeros rather than as missing data."""
    doc: dict[str, object] = {
        "_aws": {
            "Timestamp": int(time.time() * 1000),
            "CloudWatchMetrics": [
                {
                    "Namespace": METRIC_NAMESPACE,
                    "Dimensions": [["Queue"]],
                    "Metrics": [{"Name": o.metric, "Unit": "Count"} for o in Outcome],
                }
            ],
        },
        "Queue": queue,
    }
    for o in Outcome:
        doc[o.metric] = counts.of(o)
    return json.dumps(doc)
