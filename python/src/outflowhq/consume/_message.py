"""The message a consumer receives, and the errors of the consumer's half,
as Go's package github.com/outflowhq/outflow/consume has them."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum, StrEnum

#: The reason an Inbox records for a place it closed itself (Go's
#: ClosedRestaged): the place of a key this consumer applied at an earlier
#: place, which Outflow staged again.
CLOSED_RESTAGED = "restaged"


class Envelope(StrEnum):
    """The way a message reached the consumer's queue. An SNS topic's
    message with raw message delivery arrives exactly as a queue route's
    does, so it reads as SQS."""

    SQS = "sqs"
    SNS = "sns"
    EVENTBRIDGE = "eventbridge"


@dataclass(frozen=True)
class Message:
    """One outbox row as its consumer receives it (Go's consume.Message)."""

    key: str
    #: The topic ARN of an SNS envelope, else the queue ARN of a Lambda record.
    route: str = ""
    #: The FIFO message group, empty on a queue that keeps no order.
    group: str = ""
    #: The row's place in its ordered group, from 1; 0 if unordered.
    seq: int = 0
    #: Set on a message that closes a place: "dead-letter", "purged".
    closed: str = ""
    attempt: int = 0
    #: Set on every copy of a row an operator redrove (outflow.redriven):
    #: it keeps its place but may come after its group went past it, so an
    #: Inbox never lets it settle where a group joined part-way starts. A
    #: message closing a redriven row's place carries it too. Outflow
    #: leaves the mark off where it does not fit.
    redriven: bool = False
    payload: bytes = b""
    attributes: dict[str, str] = field(default_factory=dict)
    trace_parent: str = ""
    envelope: Envelope | None = None
    message_id: str = ""
    receipt_handle: str = ""

    @property
    def ordered(self) -> bool:
        """Whether the message has a place in an ordered group."""
        return self.seq > 0


class GapPolicy(IntEnum):
    """What an Inbox does at a gap in an ordered group (Go's GapPolicy)."""

    WAIT = 0
    PASS = 1


class LatePolicy(IntEnum):
    """What an Inbox does with a message its group went past."""

    RECORD = 0
    APPLY = 1


class JoinPolicy(IntEnum):
    """Where an Inbox starts an ordered group it has no cursor for."""

    FROM_START = 0
    WHERE_SEEN = 1


class ConsumeError(Exception):
    """Every outcome of the consumer's half that is not plain success;
    ``kind`` names it as conformance/consumer/*.json does."""

    kind: str = "error"


class DecodeError(ConsumeError):
    """A message that could not be decoded: ``kind`` is ``not_outflow`` or
    ``malformed`` (Go's ErrNotOutflow, ErrMalformed)."""

    def __init__(self, kind: str, message_id: str, envelope: Envelope | None, reason: str) -> None:
        env = f" ({envelope})" if envelope else ""
        what = "not a message Outflow sent" if kind == "not_outflow" else "malformed Outflow message"
        super().__init__(f"message {message_id}{env}: {what}: {reason}")
        self.kind = kind
        self.message_id = message_id
        self.envelope = envelope
        self.reason = reason


class DuplicateError(ConsumeError):
    """Already applied (Go's ErrDuplicate): acknowledge it and skip it."""

    kind = "duplicate"


class OrderError(ConsumeError):
    """A message of an ordered group refused: a gap (``kind`` "gap", Go's
    ErrGap) or a group that went past it ("passed", Go's ErrPassed)."""

    def __init__(self, key: str, group: str, place: int, cursor: int, joining: bool = False) -> None:
        self.key, self.group, self.place, self.cursor = key, group, place, cursor
        #: A redriven row started the group (JoinPolicy.WHERE_SEEN) and no
        #: message sent in its turn has moved its cursor since: a gap is then
        #: passed as the gap before a group's first place is (Go's Joining).
        self.joining = joining
        if self.gap:
            text = f"message {key}, place {place} of group {group}: an earlier place of its group is not applied: the group applied up to {cursor}"
        else:
            text = f"message {key}, place {place} of group {group}: its group has applied a later place ({cursor})"
        super().__init__(text)
        self.kind = "gap" if self.gap else "passed"

    @property
    def gap(self) -> bool:
        """Whether places cursor+1 to place-1 are missing."""
        return self.cursor < self.place


class LateError(ConsumeError):
    """Recorded late, not applied (Go's ErrLate): acknowledge it.
    ``order`` says where the group was, when known."""

    kind = "late"

    def __init__(self, message: str, order: OrderError | None = None) -> None:
        super().__init__(message)
        self.order = order


class NoGroupError(ConsumeError):
    """An ordered message without its group (Go's ErrNoGroup)."""

    kind = "no_group"


class InProgressError(ConsumeError):
    """Another copy is being applied (Go's ErrInProgress): retry later."""

    kind = "in_progress"


class HoldLostError(ConsumeError):
    """The effect ran past its hold (Go's ErrHoldLost)."""

    kind = "hold_lost"


class SkippedError(ConsumeError):
    """Not applied: an earlier message of its FIFO group failed, or the
    invocation ran out of time (Go's ErrSkipped)."""

    kind = "skipped"


class NoClosedHookError(ConsumeError):
    """A message that closes a place reached a Handler (or record_handler)
    with no ``closed`` hook (Go's ErrNoClosedHook). It is reported failed,
    logged at ERROR and counted (the ClosingMessagesWithoutHook metric),
    never acknowledged unread: before 1.0.0 it was, and a consumer wired
    to the first recipe (an Inbox used inside apply, no closed hook) left
    its group behind the place for ever, in silence. Set ``closed`` to the
    Inbox's close, or to ``ack_closed`` if the consumer keeps no order."""

    kind = "no_closed_hook"
