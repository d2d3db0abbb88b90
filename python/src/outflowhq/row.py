"""A row: one message to stage."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from . import _target as target
from .errors import InvalidRowError, Kind

#: How many attributes a row for an SQS queue or an SNS topic may carry:
#: SQS allows 10, and Outflow sends outflow.key and outflow.attempt.
MAX_OWN_ATTRIBUTES = target.MAX_ATTRIBUTES - 2
#: How many a row of an ordered route may carry: its message also carries
#: its place in the group (outflow.seq), and keeps room for
#: outflow.redriven, the mark a copy sent after an operator's redrive
#: carries so that a consumer joining where it is seen does not start the
#: group at a place sent out of turn (its size is checked with the mark).
MAX_ORDERED_ATTRIBUTES = MAX_OWN_ATTRIBUTES - 2

_MAX_SEQ = 2**63 - 1  # the widest place a row can take, for sizing
_PLACEHOLDER_KEY = "01ARZ3NDEKTSV4RRFFQ69G5FAV"  # a ULID stands in for one to generate
_MAX_ATTEMPTS_LIMIT = 1000


@dataclass(frozen=True)
class Row:
    """One message to stage.

    ``key`` is the idempotency key (empty: a new ULID), 1-128 printable
    ASCII characters. ``queue`` is the route name; names ending in ".fifo"
    need a ``group``, and a group on any other route is refused
    (group_not_fifo). ``payload`` is the body: text (a str, or bytes that
    are UTF-8 SQS accepts) is sent as it is, other bytes base64-encoded. On
    an EventBridge route it must be a JSON object. ``attributes`` become
    String message attributes (at most 8, 7 with a binary payload, one less
    on an ordered route); on EventBridge "source" and "detail-type" name
    the event's. ``not_before`` delays delivery (a naive datetime is UTC).
    ``trace_parent`` is the W3C trace context, stored as the "traceparent"
    attribute.
    """

    queue: str
    payload: bytes | str
    key: str = ""
    attributes: Mapping[str, str] | None = None
    group: str = ""
    not_before: datetime | None = None
    trace_parent: str = ""

    @property
    def payload_bytes(self) -> bytes:
        return self.payload.encode("utf-8") if isinstance(self.payload, str) else bytes(self.payload)

    def validate(self, max_message_bytes: int = 0) -> None:
        """Raises InvalidRowError for the first reason the row cannot be
        staged to an SQS queue. max_message_bytes 0 is the dispatcher's
        default, 256 KiB. A Producer checks a row of an ordered route with
        one attribute less, and a producer given routes against its
        route's own target."""
        check(self, target.Target(fifo=target.fifo_route(self.queue)), max_message_bytes, ordered=False)

    def stored_attributes(self) -> dict[str, str] | None:
        """The attributes as stored: ``attributes`` with the trace context
        added, after checking it is one. None when the row has none."""
        tp = self.trace_parent
        attrs = self.attributes
        if attrs is not None and target.ATTR_TRACE_PARENT in attrs:
            v = attrs[target.ATTR_TRACE_PARENT]
            problem = target.trace_parent_problem(v)
            if problem is not None:
                raise InvalidRowError(Kind.ATTRIBUTE_VALUE, f"invalid message attribute value: {problem}")
            if tp and tp != v:
                raise InvalidRowError(Kind.ATTRIBUTE_VALUE, "invalid message attribute value: the traceparent attribute and trace_parent differ")
            tp = v
        if not tp:
            return None if attrs is None else dict(attrs)
        problem = target.trace_parent_problem(tp)
        if problem is not None:
            raise InvalidRowError(Kind.ATTRIBUTE_VALUE, f"invalid message attribute value: {problem}")
        out = dict(attrs or {})
        out[target.ATTR_TRACE_PARENT] = tp
        return out


def check(row: Row, t: target.Target, max_bytes: int, ordered: bool) -> dict[str, str] | None:
    """Raises InvalidRowError for the first reason row cannot be staged for
    t, on an ordered route if ordered; returns its stored attributes."""
    if not row.queue.strip():
        raise InvalidRowError(Kind.EMPTY_QUEUE, "queue is empty")
    if row.key and not target.valid_id(row.key):
        raise InvalidRowError(Kind.INVALID_KEY, f"invalid key: {row.key!r} must be 1-128 printable ASCII characters without spaces")
    if row.group and not target.fifo_route(row.queue):
        # Whether a row takes a group is its route's name's to say, as
        # outflow enqueue decides: a group on any other route (a standard
        # queue, a standard topic, an event bus) would order nothing.
        raise InvalidRowError(
            Kind.GROUP_NOT_FIFO,
            f"group {row.group!r}: route {row.queue!r} is not FIFO (its name does not end in .fifo), "
            "and only a FIFO queue or topic has message groups; drop the group",
        )
    attrs = row.stored_attributes()
    most, seq = (MAX_ORDERED_ATTRIBUTES, _MAX_SEQ) if ordered else (MAX_OWN_ATTRIBUTES, 0)
    count = len(attrs or {})
    if count > most and t.kind is not target.TargetKind.EVENTBRIDGE:
        raise InvalidRowError(Kind.TOO_MANY_ATTRIBUTES, f"too many message attributes: {count} given, at most {most}")
    # Sized with the widest attempt number and place there can be: a
    # message that fits only at attempt 1 would be refused at attempt 10.
    target.validate(row.key or _PLACEHOLDER_KEY, row.payload_bytes, attrs or {}, row.group, _MAX_ATTEMPTS_LIMIT, seq, t, max_bytes)
    return attrs
