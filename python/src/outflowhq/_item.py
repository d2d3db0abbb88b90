"""The stored form of a row (Go's internal/dynamo codec, shard and size):
the item format docs/other-languages.md describes."""

from __future__ import annotations

import hashlib
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

# Attribute names of a row's item.
PK = "pk"
QUEUE = "queue"
PAYLOAD = "payload"
ATTRIBUTES = "attributes"
GROUP = "group"
NOT_BEFORE = "not_before"
SEQ = "seq"
PREV = "prev"
TAIL = "tail"
STATUS = "status"
ATTEMPT = "attempt"
CREATED_AT = "created_at"
DUE_AT = "due_at"
SHARD = "shard"
STAGE_ID = "stage_id"
ERRORS = "errors"
#: A tombstone's digest of the payload and attributes its settle dropped
#: (Go: dynamo.AttrContent; content_digest says how it is made).
CONTENT = "content"

STATUS_PENDING = "pending"
CONFIG_KEY = "config dispatcher"
AUDIT_KEY = "audit due"
DEAD_QUEUE_NONE = "(none)"

# Size limits (Go: dynamo.ItemLimit, Growth).
ITEM_LIMIT = 400_000
MAX_ERROR_BYTES = 512
ERROR_HISTORY = 5
MAX_ATTEMPTS_LIMIT = 1000
_NUM_MAX = 22

#: The attributes Outflow adds to a row after staging, for which staging
#: leaves room (Growth): not counted in a row's own size.
_DELIVERY_STATE = (
    "claim_token",
    "lease_until",
    "claimed_at",
    ERRORS,
    "last_error",
    "failed_at",
    "dead_queue",
    "unsure_at",
    "done_at",
    "expires_at",
    "redriven_at",
    "place_maybe_closed",
)

AttributeValue = dict[str, Any]
Item = dict[str, AttributeValue]

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def epoch_ms(t: datetime) -> int:
    """t in whole epoch milliseconds, rounded down as Go's UnixMilli; a
    naive datetime is taken as UTC."""
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    return (t - _EPOCH) // _MS


_MS = datetime(1970, 1, 1, 0, 0, 0, 1000, tzinfo=timezone.utc) - _EPOCH


def group_key(queue: str, group: str) -> str:
    """The key of an ordered group's item."""
    return f"group {queue} {group}"


def reserved_key(key: str) -> bool:
    return key in (CONFIG_KEY, AUDIT_KEY) or key.startswith("group ")


def fnv1a32(data: bytes) -> int:
    h = 0x811C9DC5
    for b in data:
        h ^= b
        h = (h * 0x01000193) & 0xFFFFFFFF
    return h


def shard_of(key: str, shards: int) -> str:
    """The due-index partition of a key: FNV-1a-32 of it, mod shards."""
    return str(fnv1a32(key.encode("utf-8")) % shards)


def dead_queue(queue: str) -> str:
    return queue if queue and len(queue.encode("utf-8")) <= 1024 else DEAD_QUEUE_NONE


def growth(queue: str) -> int:
    """The most a staged row's item can grow over its life (Go: Growth)."""
    entry = 1 + 3 + len("at") + _NUM_MAX + len("attempt") + _NUM_MAX + len("message") + MAX_ERROR_BYTES + 3 + len("unsure") + 2
    claim = len("claim_token") + 26 + len("lease_until") + _NUM_MAX + len("claimed_at") + _NUM_MAX + len(ATTEMPT) + _NUM_MAX
    return (
        claim
        + len(STATUS)
        + len(STATUS_PENDING)
        + len(ERRORS)
        + 3
        + (ERROR_HISTORY + 1) * entry
        + len("last_error")
        + MAX_ERROR_BYTES
        + len("failed_at")
        + _NUM_MAX
        + len("dead_queue")
        + len(dead_queue(queue).encode("utf-8"))
        + len("unsure_at")
        + _NUM_MAX
        + len("done_at")
        + _NUM_MAX
        + len("expires_at")
        + _NUM_MAX
        + len("redriven_at")
        + _NUM_MAX
        + len("place_maybe_closed")
        + _NUM_MAX
    )


def _len(s: str) -> int:
    return len(s.encode("utf-8", "surrogatepass"))


def value_size(v: AttributeValue) -> int:
    """A value's size as DynamoDB counts it (numbers: their text plus one)."""
    if "S" in v:
        return _len(v["S"])
    if "N" in v:
        return len(v["N"]) + 1
    if "B" in v:
        return len(v["B"])
    if "BOOL" in v or "NULL" in v:
        return 1
    if "L" in v:
        return 3 + sum(1 + value_size(e) for e in v["L"])
    if "M" in v:
        return 3 + item_size(v["M"]) + len(v["M"])
    if "SS" in v:
        return 3 + sum(1 + _len(e) for e in v["SS"])
    if "NS" in v:
        return 3 + sum(2 + len(e) for e in v["NS"])
    if "BS" in v:
        return 3 + sum(1 + len(e) for e in v["BS"])
    return 0


def item_size(item: Mapping[str, AttributeValue]) -> int:
    return sum(_len(name) + value_size(v) for name, v in item.items())


def base_size(item: Mapping[str, AttributeValue]) -> int:
    """An item's size without the delivery state growth makes room for."""
    return sum(_len(name) + value_size(v) for name, v in item.items() if name not in _DELIVERY_STATE)


def payload_value(payload: bytes) -> AttributeValue:
    """A payload as stored: S for UTF-8 text, B otherwise."""
    try:
        return {"S": payload.decode("utf-8")}
    except UnicodeDecodeError:
        return {"B": payload}


def new_stage_id() -> str:
    """16 base32 characters, 80 random bits, as Outflow's stagers write."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
    return "".join(alphabet[b % 32] for b in secrets.token_bytes(16))


_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def new_ulid(t: datetime) -> str:
    """A ULID: t's epoch milliseconds and 80 random bits, Crockford base32."""
    n = (epoch_ms(t) & ((1 << 48) - 1)) << 80 | int.from_bytes(os.urandom(10), "big")
    return "".join(_CROCKFORD[(n >> (5 * i)) & 31] for i in reversed(range(26)))


@dataclass(frozen=True)
class Content:
    """What a producer chose for a row (Go: dynamo.SameContent compares it):
    queue, payload, attributes without the trace context, group and delay.
    A tombstone (dropped) has no payload or attributes left, only their
    digest: same_content compares it by that."""

    queue: str
    payload: bytes
    attributes: Mapping[str, str]
    group: str
    not_before_ms: int
    #: The stored digest (the item's content), "" when it has none.
    digest: str = ""
    #: A tombstone whose settle dropped the payload and attributes (Go:
    #: dynamo's dropped): a digest, and neither a payload nor attributes.
    dropped: bool = False


_TRACE_PARENT = "traceparent"
_DIGEST_PREFIX = "sha256:"


def _utf8(s: str) -> bytes:
    return s.encode("utf-8", "surrogatepass")


def content_digest(payload: bytes, attributes: Mapping[str, str] | None) -> str:
    """Go's dynamo.ContentDigest, what a tombstone keeps of the payload and
    attributes its settle dropped: "sha256:" and the lower-case hex SHA-256
    of the payload, then of each attribute but the trace context, in
    ascending byte order of its UTF-8 name, its name and its value (UTF-8),
    each of these byte strings preceded by its length as an unsigned
    64-bit big-endian integer."""
    h = hashlib.sha256()

    def field(b: bytes) -> None:
        h.update(len(b).to_bytes(8, "big"))
        h.update(b)

    field(bytes(payload))
    named = sorted((_utf8(k), _utf8(v)) for k, v in (attributes or {}).items() if k != _TRACE_PARENT)
    for name, value in named:
        field(name)
        field(value)
    return _DIGEST_PREFIX + h.hexdigest()


def _digest_of(c: Content) -> str:
    return c.digest if c.dropped else content_digest(c.payload, c.attributes)


def same_content(a: Content, b: Content) -> bool:
    """Go's dynamo.SameContent: queue, group and delay alike, and the
    payload and attributes (trace context aside) alike, compared by their
    digest when either is a tombstone that dropped them, else as they are
    (a done row written before tombstones dropped them keeps its payload)."""
    if a.queue != b.queue or a.group != b.group or a.not_before_ms != b.not_before_ms:
        return False
    if a.dropped or b.dropped:
        return _digest_of(a) == _digest_of(b)
    return a.payload == b.payload and dict(a.attributes) == dict(b.attributes)


def content_of(item: Mapping[str, Any]) -> Content | None:
    """A staged item's content; None when it has no key (not a row)."""
    pk = item.get(PK)
    if not isinstance(pk, Mapping) or "S" not in pk:
        return None

    def s(name: str) -> str:
        v = item.get(name)
        return str(v["S"]) if isinstance(v, Mapping) and "S" in v else ""

    payload = item.get(PAYLOAD)
    raw = b""
    has_payload = False
    if isinstance(payload, Mapping) and "S" in payload:
        raw, has_payload = str(payload["S"]).encode("utf-8"), True
    elif isinstance(payload, Mapping) and "B" in payload:
        raw, has_payload = bytes(payload["B"]), True
    attrs: dict[str, str] = {}
    m = item.get(ATTRIBUTES)
    has_attributes = isinstance(m, Mapping) and isinstance(m.get("M"), Mapping)
    if isinstance(m, Mapping) and isinstance(m.get("M"), Mapping):
        attrs = {k: str(v["S"]) for k, v in m["M"].items() if isinstance(v, Mapping) and "S" in v}
    attrs.pop(_TRACE_PARENT, None)
    nb = item.get(NOT_BEFORE)
    not_before = 0
    if isinstance(nb, Mapping) and "N" in nb:
        try:
            not_before = int(nb["N"])
        except ValueError:
            not_before = 0
    digest = s(CONTENT)
    dropped = digest != "" and not has_payload and not has_attributes
    return Content(s(QUEUE), raw, attrs, s(GROUP), not_before, digest, dropped)


def staged_row_key(item: Mapping[str, Any]) -> str:
    """The row key of an item that stages a row: one with a string pk and
    queue, a payload and a status; "" for anything else."""
    for name, kind in ((PK, "S"), (QUEUE, "S"), (STATUS, "S")):
        v = item.get(name)
        if not isinstance(v, Mapping) or kind not in v:
            return ""
    p = item.get(PAYLOAD)
    if not isinstance(p, Mapping) or not ("S" in p or "B" in p):
        return ""
    return str(item[PK]["S"])
