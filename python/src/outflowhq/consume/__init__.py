"""The consumer's half of Outflow, as Go's package
github.com/outflowhq/outflow/consume: decode what reached the queue
(from_lambda, from_queue, from_sqs), apply each row once and in order with
an Inbox in your own DynamoDB transaction, guard side effects outside
DynamoDB with Idempotency, consume from Lambda with Handler and from a
long-running process with Poller (both wired to an Inbox by
Inbox.handler and Inbox.poller), and see what became of each message
(Outcome, Result, Counts)."""

from ._decode import from_lambda, from_queue, from_sqs
from ._handler import METRIC_NO_CLOSED_HOOK, Handler, ack_closed, apply_message, record_handler
from ._idempotency import Idempotency
from ._inbox import ATTR_EXPIRES_AT, ATTR_PK, Effect, Inbox, TransactItem
from ._message import (
    CLOSED_RESTAGED,
    ConsumeError,
    DecodeError,
    DuplicateError,
    Envelope,
    GapPolicy,
    HoldLostError,
    InProgressError,
    JoinPolicy,
    LateError,
    LatePolicy,
    Message,
    NoClosedHookError,
    NoGroupError,
    OrderError,
    SkippedError,
)
from ._outcome import METRIC_NAMESPACE, Counts, Outcome, Result
from ._poller import MAX_VISIBILITY, Poller

__all__ = [
    "ATTR_EXPIRES_AT",
    "ATTR_PK",
    "CLOSED_RESTAGED",
    "ConsumeError",
    "Counts",
    "DecodeError",
    "DuplicateError",
    "Effect",
    "Envelope",
    "GapPolicy",
    "Handler",
    "HoldLostError",
    "Idempotency",
    "InProgressError",
    "Inbox",
    "JoinPolicy",
    "LateError",
    "LatePolicy",
    "MAX_VISIBILITY",
    "METRIC_NAMESPACE",
    "METRIC_NO_CLOSED_HOOK",
    "Message",
    "NoClosedHookError",
    "NoGroupError",
    "OrderError",
    "Outcome",
    "Poller",
    "Result",
    "SkippedError",
    "TransactItem",
    "ack_closed",
    "apply_message",
    "from_lambda",
    "from_queue",
    "from_sqs",
    "record_handler",
]
