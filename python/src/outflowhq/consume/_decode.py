"""Decoding what reached a consumer's queue: a queue route's message, an
SNS envelope or an EventBridge event, from a Lambda SQS record or a boto3
ReceiveMessage message (Go's FromLambda, FromSQS, FromQueue).

The body is read as Go's encoding/json reads it into the consume
package's structs: member names match case-insensitively, the last of
duplicates wins, and a member of the wrong type makes the body unreadable.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ._message import DecodeError, Envelope, Message

ATTR_KEY = "outflow.key"
ATTR_ATTEMPT = "outflow.attempt"
ATTR_ENCODING = "outflow.encoding"
ATTR_SEQ = "outflow.seq"
ATTR_CLOSED = "outflow.closed"
#: Marks every copy of a row an operator redrove; any value (Outflow sends "1").
ATTR_REDRIVEN = "outflow.redriven"
ATTR_TRACE_PARENT = "traceparent"
ATTR_SOURCE = "source"
ATTR_DETAIL_TYPE = "detail-type"
MEMBER_OUTFLOW = "outflow"
GROUP_ATTRIBUTE = "MessageGroupId"

_INT = re.compile(r"[+-]?[0-9]+\Z", re.ASCII)
_INT64 = (-(1 << 63), (1 << 63) - 1)
_NOT_ENVELOPE = f"no {ATTR_KEY} attribute, and the body is not an SNS envelope or an EventBridge event"
_WS = " \t\r\n"


@dataclass
class _Received:
    id: str
    receipt: str
    body: str
    source: str  # the queue ARN Lambda names
    queue: str  # the queue's ARN or URL when known
    attrs: dict[str, str]
    group: str

    def unordered(self) -> bool:
        """A queue known to keep no order: one not named .fifo."""
        return self.queue != "" and not self.queue.endswith(".fifo")


def _str(v: Any) -> str:
    return v if isinstance(v, str) else ""


def from_lambda(record: Mapping[str, Any]) -> Message:
    """Decode a record of the SQS event Lambda gives a function subscribed
    to a queue. Whether it keeps an order is its queue's to say
    (eventSourceARN, named .fifo or not)."""
    attrs: dict[str, str] = {}
    for k, v in (record.get("messageAttributes") or {}).items():
        if isinstance(v, Mapping) and isinstance(v.get("stringValue"), str):
            attrs[k] = v["stringValue"]
    source = _str(record.get("eventSourceARN"))
    system = record.get("attributes") or {}
    return _decode(
        _Received(
            id=_str(record.get("messageId")),
            receipt=_str(record.get("receiptHandle")),
            body=_str(record.get("body")),
            source=source,
            queue=source,
            attrs=attrs,
            group=_str(system.get(GROUP_ATTRIBUTE)),
        )
    )


def from_sqs(message: Mapping[str, Any]) -> Message:
    """Decode a message boto3's receive_message returned, from a queue it
    does not know: a MessageGroupId is taken to mean a FIFO queue. Prefer
    from_queue. Ask for MessageAttributeNames ["All"] and the
    MessageGroupId system attribute."""
    return from_queue("", message)


def from_queue(queue_url: str, message: Mapping[str, Any]) -> Message:
    """Decode a message receive_message returned from the queue at
    queue_url: on a queue that is not FIFO the message has no group and no
    place, whatever group it carries."""
    attrs: dict[str, str] = {}
    for k, v in (message.get("MessageAttributes") or {}).items():
        if isinstance(v, Mapping) and isinstance(v.get("StringValue"), str):
            attrs[k] = v["StringValue"]
    system = message.get("Attributes") or {}
    return _decode(
        _Received(
            id=_str(message.get("MessageId")),
            receipt=_str(message.get("ReceiptHandle")),
            body=_str(message.get("Body")),
            source="",
            queue=queue_url,
            attrs=attrs,
            group=_str(system.get(GROUP_ATTRIBUTE)),
        )
    )


class _Obj(list[tuple[str, Any]]):
    """A JSON object as its (name, value) members, in order."""


class _Unreadable(Exception):
    """The body does not read into Go's struct."""


def _fold(name: str) -> str:
    return name.casefold()


def _struct(obj: Any, fields: Mapping[str, str]) -> dict[str, Any]:
    """An object's members by field, as Go's json.Unmarshal matches them
    to a struct's fields (exact name first, else case-insensitively); the
    object's members come as (name, value) pairs in order."""
    if obj is None:
        return {}
    if not isinstance(obj, _Obj):
        raise _Unreadable("not an object")
    exact = {v: k for k, v in fields.items()}
    folded = {_fold(v): k for k, v in fields.items()}
    out: dict[str, Any] = {}
    for name, value in obj:
        f = exact.get(name) or folded.get(_fold(name))
        if f is not None:
            out[f] = value
    return out


def _pairs_hook(pairs: list[tuple[str, Any]]) -> Any:
    return _Obj(pairs)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _loads(text: str) -> Any:
    return json.loads(text, object_pairs_hook=_pairs_hook, parse_constant=_reject_constant)


def _want_str(v: Any) -> str:
    if v is None:
        return ""
    if not isinstance(v, str):
        raise _Unreadable("not a string")
    return v


def _want_opt_str(v: Any, present: bool) -> str | None:
    if not present or v is None:
        return None
    if not isinstance(v, str):
        raise _Unreadable("not a string")
    return v


_ENVELOPE_FIELDS = {
    "type": "Type",
    "topic": "TopicArn",
    "message": "Message",
    "attrs": "MessageAttributes",
    "detail_type": "detail-type",
    "source": "source",
    "detail": "detail",
}


def _decode(r: _Received) -> Message:
    """A queue route's message (Outflow's attributes on the message), else
    an SNS envelope, else an EventBridge event."""
    if ATTR_KEY in r.attrs:
        return _from_attributes(r, Envelope.SQS, "")
    try:
        env = _struct(_loads(r.body), _ENVELOPE_FIELDS)
        typ = _want_str(env.get("type"))
        topic = _want_str(env.get("topic"))
        message = _want_opt_str(env.get("message"), "message" in env)
        attrs = _sns_attributes(env.get("attrs"))
        detail_type = _want_opt_str(env.get("detail_type"), "detail_type" in env)
        source = _want_str(env.get("source"))
    except (ValueError, _Unreadable):
        raise DecodeError("not_outflow", r.id, None, _NOT_ENVELOPE) from None
    if typ == "Notification" and message is not None:
        # The envelope's MessageGroupId is never the group: a FIFO queue
        # gives the group itself.
        inner = _Received(id=r.id, receipt=r.receipt, body=message, source=topic, queue=r.queue, attrs=attrs, group=r.group)
        if ATTR_KEY not in inner.attrs:
            raise DecodeError("not_outflow", r.id, Envelope.SNS, f"the SNS message has no {ATTR_KEY} attribute")
        return _from_attributes(inner, Envelope.SNS, topic)
    if detail_type is not None and "detail" in env:
        return _from_event(r, detail_type, source)
    raise DecodeError("not_outflow", r.id, None, _NOT_ENVELOPE)


def _sns_attributes(v: Any) -> dict[str, str]:
    if v is None:
        return {}
    if not isinstance(v, _Obj):
        raise _Unreadable("MessageAttributes is not an object")
    out: dict[str, str] = {}
    for name, attr in v:
        a = _struct(attr, {"type": "Type", "value": "Value"})
        typ, value = _want_str(a.get("type")), _want_str(a.get("value"))
        if typ in ("String", "Number"):
            out[name] = value
        else:
            out.pop(name, None)  # Go's map holds the last; it is skipped
    return out


def _whole(v: str | None) -> int | None:
    """A decimal whole number as Go's strconv.Atoi reads it, else None."""
    if v is None or not _INT.match(v):
        return None
    n = int(v)
    return n if _INT64[0] <= n <= _INT64[1] else None


def _b64(body: str) -> bytes | None:
    """Go's base64.StdEncoding: padded, newlines ignored."""
    text = body.replace("\r", "").replace("\n", "")
    if len(text) % 4 != 0:
        return None
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        return None


def _from_attributes(r: _Received, env: Envelope, route: str) -> Message:
    """A message whose body is the payload and whose attributes are
    Outflow's and the row's."""

    def bad(reason: str) -> DecodeError:
        return DecodeError("malformed", r.id, env, reason)

    if route == "":
        route = r.source
    key = r.attrs.get(ATTR_KEY, "")
    if key == "":
        raise bad(f"{ATTR_KEY} is empty")
    attempt = _whole(r.attrs.get(ATTR_ATTEMPT))
    if attempt is None or attempt < 1:
        raise bad(f"{ATTR_ATTEMPT} must be a whole number from 1")
    group, seq = r.group, 0
    if ATTR_SEQ in r.attrs:
        s = _whole(r.attrs[ATTR_SEQ])
        if s is None or s < 1:
            raise bad(f"{ATTR_SEQ} must be a whole number from 1")
        seq = s
    if r.unordered():
        group, seq = "", 0
    closed = ""
    if ATTR_CLOSED in r.attrs:
        closed = r.attrs[ATTR_CLOSED]
        if closed == "":
            raise bad(f"{ATTR_CLOSED} is empty")
    enc = r.attrs.get(ATTR_ENCODING)
    if enc is None:
        payload = r.body.encode("utf-8", "surrogateescape")
    elif enc == "base64":
        decoded = _b64(r.body)
        if decoded is None:
            raise bad(f"the body is not the base64 {ATTR_ENCODING} says")
        payload = decoded
    else:
        raise bad(f"unknown {ATTR_ENCODING} {json.dumps(enc)}")
    attributes: dict[str, str] = {}
    trace = ""
    for k, v in r.attrs.items():
        if k == ATTR_TRACE_PARENT:
            trace = v
        elif not k.lower().startswith("outflow."):
            attributes[k] = v
    return Message(
        key=key,
        route=route,
        group=group,
        seq=seq,
        closed=closed,
        attempt=attempt,
        redriven=ATTR_REDRIVEN in r.attrs,
        payload=payload,
        attributes=attributes,
        trace_parent=trace,
        envelope=env,
        message_id=r.id,
        receipt_handle=r.receipt,
    )


def _skip_ws(s: str, i: int) -> int:
    while i < len(s) and s[i] in _WS:
        i += 1
    return i


_DECODER = json.JSONDecoder()


def _value_end(s: str, i: int) -> int:
    """The end of the JSON value that starts at s[i] (the body is JSON)."""
    _, end = _DECODER.raw_decode(s, i)
    return end


def _top_members(s: str) -> list[tuple[str, int, int]]:
    """The members of the object that is the whole of s: name and the span
    of the value as written."""
    out: list[tuple[str, int, int]] = []
    i = _skip_ws(s, 0)
    if i >= len(s) or s[i] != "{":
        return out
    i = _skip_ws(s, i + 1)
    while i < len(s) and s[i] != "}":
        name_end = _value_end(s, i)
        name = json.loads(s[i:name_end])
        i = _skip_ws(s, name_end) + 1  # the colon
        start = _skip_ws(s, i)
        end = _value_end(s, start)
        out.append((name, start, end))
        i = _skip_ws(s, end)
        if i < len(s) and s[i] == ",":
            i = _skip_ws(s, i + 1)
    return out


def _go_string(name: str) -> str:
    """A JSON string as Go's encoder writes it with HTML escaping off."""
    out = ['"']
    for ch in name:
        c = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif c < 0x20:
            out.append({"\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(ch, f"\\u{c:04x}"))
        elif ch in "\u2028\u2029":
            out.append(f"\\u{c:04x}")
        elif 0xD800 <= c <= 0xDFFF:
            out.append("\ufffd")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _detail_span(body: str) -> tuple[int, int]:
    """The span of the envelope's detail member as written: the last
    member Go would read into it."""
    span = (0, 0)
    for name, start, end in _top_members(body):
        if name == "detail" or _fold(name) == "detail":
            span = (start, end)
    return span


def _from_event(r: _Received, detail_type: str, source: str) -> Message:
    """An EventBridge event a rule sent to the queue: the detail holds
    Outflow's member beside the payload's own."""

    def fail(kind: str, reason: str) -> DecodeError:
        return DecodeError(kind, r.id, Envelope.EVENTBRIDGE, reason)

    start, end = _detail_span(r.body)
    detail = r.body[start:end]
    if not detail.startswith("{"):
        raise fail("not_outflow", "the event's detail is not a JSON object")
    raw: str | None = None
    parts: list[str] = []
    for name, vs, ve in _top_members(detail):
        if name == MEMBER_OUTFLOW:
            raw = detail[vs:ve]
            continue
        parts.append(_go_string(name) + ":" + detail[vs:ve])
    if raw is None:
        raise fail("not_outflow", f"the event's detail has no {MEMBER_OUTFLOW} member")
    try:
        meta = _struct(_loads(raw), {"key": "key", "attempt": "attempt", "redriven": "redriven", "trace": "traceparent", "attrs": "attributes"})
        key = _want_str(meta.get("key"))
        attempt = meta.get("attempt")
        if attempt is None:
            attempt = 0
        if isinstance(attempt, bool) or not isinstance(attempt, int) or not _INT64[0] <= attempt <= _INT64[1]:
            raise _Unreadable("attempt is not a whole number")
        redriven = meta.get("redriven")
        if redriven is None:
            redriven = False
        if not isinstance(redriven, bool):
            raise _Unreadable("redriven is not a bool")
        trace = _want_str(meta.get("trace"))
        own: dict[str, str] = {}
        a = meta.get("attrs")
        if a is not None:
            if not isinstance(a, _Obj):
                raise _Unreadable("attributes is not an object")
            for k, v in a:
                own[k] = _want_str(v)
    except (ValueError, _Unreadable) as e:
        raise fail("malformed", f"the detail's {MEMBER_OUTFLOW} member: {e}") from None
    if key == "":
        raise fail("malformed", f"the detail's {MEMBER_OUTFLOW}.key is empty")
    if attempt < 1:
        raise fail("malformed", f"the detail's {MEMBER_OUTFLOW}.attempt must be a whole number from 1")
    own[ATTR_SOURCE] = source
    own[ATTR_DETAIL_TYPE] = detail_type
    return Message(
        key=key,
        group="" if r.unordered() else r.group,
        attempt=attempt,
        redriven=redriven,
        payload=("{" + ",".join(parts) + "}").encode("utf-8", "surrogatepass"),
        attributes=own,
        trace_parent=trace,
        envelope=Envelope.EVENTBRIDGE,
        message_id=r.id,
        receipt_handle=r.receipt,
    )
