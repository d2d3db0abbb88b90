"""The consumer's half of Outflow, as Go's package
github.com/outflowhq/outflow/consume: decode what reached the queue
(from_lambda, from_queue, from_sqs), apply each row once and in order with
an Inbox in your own DynamoDB transaction, guard side effects outside
DynamoDB with Idempotency, and consume from Lambda with Handler."""

from ._decode import from_lambda, from_queue, from_sqs
from ._handler import METRIC_NAMESPACE, METRIC_NO_CLOSED_HOOK, Handler, ack_closed, apply_message, record_handler
from ._idempotency import Idempotency
from ._inbox import ATTR_EXPIRES_AT, ATTR_PK, Inbox, TransactItem
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

__all__ = [
    "ATTR_EXPIRES_AT",
    "ATTR_PK",
    "CLOSED_RESTAGED",
    "ConsumeError",
    "DecodeError",
    "DuplicateError",
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
    "METRIC_NAMESPACE",
    "METRIC_NO_CLOSED_HOOK",
    "Message",
    "NoClosedHookError",
    "NoGroupError",
    "OrderError",
    "SkippedError",
    "TransactItem",
    "ack_closed",
    "apply_message",
    "from_lambda",
    "from_queue",
    "from_sqs",
    "record_handler",
]
