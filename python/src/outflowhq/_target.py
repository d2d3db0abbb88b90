"""What a route's target accepts: the dispatcher's checks (Go's
internal/target), applied at staging."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from urllib.parse import unquote_to_bytes, urlsplit

from .errors import ConfigError, InvalidRowError, Kind

# Message attributes Outflow sets on every message.
ATTR_KEY = "outflow.key"
ATTR_ATTEMPT = "outflow.attempt"
ATTR_ENCODING = "outflow.encoding"
ATTR_SEQ = "outflow.seq"
#: The mark of a copy sent after an operator's redrive, and its value.
ATTR_REDRIVEN, REDRIVEN_VALUE = "outflow.redriven", "1"
ATTR_TRACE_PARENT = "traceparent"

MAX_ATTRIBUTES = 10
MAX_MESSAGE_BYTES = 256 * 1024
MAX_SNS_BYTES = 256 * 1024
MAX_ID = 128

MAX_EVENT_BYTES = 256 * 1024 - 1
MAX_SOURCE_CHARS = 256
MAX_DETAIL_TYPE_CHARS = 128
MAX_DETAIL_DEPTH = 1000
ATTR_SOURCE = "source"
ATTR_DETAIL_TYPE = "detail-type"
MEMBER_OUTFLOW = "outflow"

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


class TargetKind(Enum):
    SQS = "SQS"
    SNS = "SNS"
    EVENTBRIDGE = "EventBridge"


@dataclass(frozen=True)
class Target:
    """Where a route delivers, read from its target string."""

    kind: TargetKind = TargetKind.SQS
    address: str = ""
    fifo: bool = False
    source: str = ""
    detail_type: str = ""


def fifo_route(queue: str) -> bool:
    return queue.endswith(".fifo")


_TOPIC_ARN = re.compile(r"arn:aws[a-z-]*:sns:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_-]+(\.fifo)?")
_BUS_ARN = re.compile(r"arn:aws[a-z-]*:events:[a-z0-9-]+:[0-9]{12}:event-bus/([A-Za-z0-9._/-]{1,256})")
_BUS_NAME = re.compile(r"[A-Za-z0-9._-]{1,256}")
_QUEUE_NAME = re.compile(r"[A-Za-z0-9_-]{1,80}|[A-Za-z0-9_-]{1,75}\.fifo")


def _bad(message: str) -> ConfigError:
    return ConfigError(Kind.INVALID_CONFIG, message)


def parse_target(s: str) -> Target:
    """Reads a route's target: an SQS queue URL, an SNS topic ARN, or an
    EventBridge bus ARN or name with "?source=S&detail-type=D"."""
    address, has_options, options = s.partition("?")
    by_name = False
    if address.startswith("arn:") and ":sns:" in address:
        if not _TOPIC_ARN.fullmatch(address) or len(address[address.rindex(":") + 1 :]) > 256:
            raise _bad(f"{address!r} is not an SNS topic ARN")
        t = Target(TargetKind.SNS, address, fifo=address.endswith(".fifo"))
    elif address.startswith("arn:") and ":events:" in address:
        if not _BUS_ARN.fullmatch(address):
            raise _bad(f"{address!r} is not an EventBridge event bus ARN")
        t = Target(TargetKind.EVENTBRIDGE, address)
    elif "://" in address:
        bad_url = _bad(f"{address!r} is not a queue URL (http or https, no credentials or fragment, ending in the queue's name)")
        try:
            u = urlsplit(address)
        except ValueError:
            raise bad_url from None
        if u.scheme not in ("http", "https") or not u.netloc or "@" in u.netloc or "#" in address:
            raise bad_url
        path = unquote_to_bytes(u.path).decode("utf-8", "replace")
        name = path[path.rfind("/") + 1 :]
        if not _QUEUE_NAME.fullmatch(name):
            raise bad_url
        t = Target(TargetKind.SQS, address, fifo=name.endswith(".fifo"))
    elif _BUS_NAME.fullmatch(address):
        t, by_name = Target(TargetKind.EVENTBRIDGE, address), True
    else:
        raise _bad(f"{address!r} is not a queue URL, a topic ARN or an event bus ARN or name")
    if has_options and t.kind is not TargetKind.EVENTBRIDGE:
        raise _bad(f"{s!r}: only EventBridge routes take options")
    source, detail_type = _read_options(s, options)
    t = Target(t.kind, t.address, t.fifo, source, detail_type)
    if by_name and not source and not detail_type:
        raise _bad(f"{s!r}: a bus given by name needs its options ({address}?source=S&detail-type=D) or its ARN")
    return t


_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")


def _read_options(s: str, options: str) -> tuple[str, str]:
    seen: dict[str, str] = {}
    for opt in options.split("&"):
        if not opt:
            continue
        name, _, raw = opt.partition("=")
        if _ESCAPE.search(raw):
            raise _bad(f"{s!r}: option {name}: invalid URL escape")
        value = unquote_to_bytes(raw).decode("utf-8", "surrogateescape")
        if not value or name in seen:
            raise _bad(f"{s!r}: option {name} wants one non-empty value")
        if name not in (ATTR_SOURCE, ATTR_DETAIL_TYPE):
            raise _bad(f"{s!r}: unknown option {name!r} (want source or detail-type)")
        seen[name] = value
    source, detail_type = seen.get(ATTR_SOURCE, ""), seen.get(ATTR_DETAIL_TYPE, "")
    for check in (_check_source(source), _check_detail_type(detail_type)):
        if check is not None:
            raise _bad(f"{s!r}: {check}")
    return source, detail_type


def parse_routes(routes: str | Mapping[str, str]) -> dict[str, Target]:
    """Reads routes, "name=target,name=target" as OUTFLOW_ROUTES or a
    mapping, into their targets. A name ends in .fifo exactly when its
    target is a FIFO queue or topic."""
    pairs: list[tuple[str, str]] = []
    if isinstance(routes, str):
        for part in routes.split(","):
            part = part.strip()
            if not part:
                continue
            name, eq, raw = part.partition("=")
            name, raw = name.strip(), raw.strip()
            if not eq or not name or not raw:
                raise _bad(f"route {part!r}: want name=target")
            pairs.append((name, raw))
    else:
        pairs = list(routes.items())
    out: dict[str, Target] = {}
    for name, raw in pairs:
        if not name or not raw:
            raise _bad(f"route {name!r}: want a name and a target")
        try:
            t = parse_target(raw)
        except ConfigError as e:
            raise _bad(f"route {name!r}: {e}") from None
        if t.fifo != name.endswith(".fifo"):
            raise _bad(f"route {name!r}: a route name ends in .fifo exactly when its queue or topic is FIFO")
        if name in out:
            raise _bad(f"route {name!r}: given twice")
        out[name] = t
    return out


def valid_id(s: str) -> bool:
    """A valid FIFO message group or deduplication id: 1-128 printable ASCII
    characters without spaces."""
    return 0 < len(s) <= MAX_ID and all("!" <= c <= "~" for c in s)


def sqs_text(p: bytes) -> bool:
    """Non-empty UTF-8 made only of the characters SQS allows."""
    if not p:
        return False
    try:
        text = p.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return _sqs_chars(text)


def _sqs_chars(text: str) -> bool:
    for ch in text:
        r = ord(ch)
        if not (
            r in (0x9, 0xA, 0xD)
            or 0x20 <= r <= 0xD7FF
            or 0xE000 <= r <= 0xFFFD
            or 0x10000 <= r <= 0x10FFFF
        ):
            return False
    return True


def body(payload: bytes) -> tuple[str, bool]:
    """The message body for a payload, and whether it is base64."""
    if sqs_text(payload):
        return payload.decode("utf-8"), False
    return base64.b64encode(payload).decode("ascii"), True


_NAME_CHARS = re.compile(r"[A-Za-z0-9_.-]*")


def _attribute_name(name: str) -> None:
    def bad(why: str) -> InvalidRowError:
        return InvalidRowError(Kind.ATTRIBUTE_NAME, f"invalid message attribute name: {name!r} {why}")

    lower = name.lower()
    if not name or len(name.encode("utf-8")) > 256:
        raise bad("must be 1-256 characters")
    if lower.startswith("outflow."):
        raise bad("uses the reserved outflow. prefix")
    if lower.startswith("aws.") or lower.startswith("amazon."):
        raise bad("uses a prefix reserved by AWS")
    if name.startswith(".") or name.endswith(".") or ".." in name:
        raise bad("may not start or end with a period or hold two in a row")
    if not _NAME_CHARS.fullmatch(name):
        raise bad("may hold only letters, digits, underscores, hyphens and periods")


def check_attributes(attrs: Mapping[str, str]) -> None:
    """The attribute rules every target shares: SQS's names and values,
    outside the outflow. prefix."""
    for k in sorted(attrs):
        _attribute_name(k)
        if not attrs[k] or not _sqs_chars(attrs[k]):
            raise InvalidRowError(Kind.ATTRIBUTE_VALUE, f"invalid message attribute value: {k!r} must be non-empty text of characters SQS allows")


def _attr_type(name: str) -> str:
    return "Number" if name in (ATTR_ATTEMPT, ATTR_SEQ) else "String"


def _utf8_len(s: str) -> int:
    return len(s.encode("utf-8", "surrogatepass"))


def size_limit(t: Target, max_bytes: int) -> tuple[int, str]:
    limit = max_bytes if max_bytes > 0 else MAX_MESSAGE_BYTES
    if t.kind is TargetKind.SNS:
        return min(limit, MAX_SNS_BYTES), "SNS's "
    return limit, "the "


def check_message(
    key: str, payload: bytes, attributes: Mapping[str, str], group: str, attempt: int, seq: int, fifo: bool, limit: int, whose: str
) -> None:
    """Why SQS or SNS would refuse the row's message, if it would."""
    if not payload:
        raise InvalidRowError(Kind.EMPTY_PAYLOAD, "empty payload: SQS and SNS need a message body of at least one character")
    text, binary = body(payload)
    attrs = {ATTR_KEY: key, ATTR_ATTEMPT: str(attempt)}
    if binary:
        attrs[ATTR_ENCODING] = "base64"
    if seq > 0:
        attrs[ATTR_SEQ] = str(seq)
    check_attributes(attributes)
    attrs.update(attributes)
    if len(attrs) > MAX_ATTRIBUTES:
        raise InvalidRowError(
            Kind.TOO_MANY_ATTRIBUTES,
            f"too many message attributes: {len(attrs)} with Outflow's own, SQS allows {MAX_ATTRIBUTES} (and SNS passes on)",
        )
    size = _utf8_len(text) + sum(_utf8_len(k) + len(_attr_type(k)) + _utf8_len(v) for k, v in attrs.items())
    if seq > 0:
        # A row of an ordered route is checked as its redriven copy, with
        # the mark the dispatcher adds (Go's target.Validate).
        if len(attrs) >= MAX_ATTRIBUTES:
            raise InvalidRowError(
                Kind.TOO_MANY_ATTRIBUTES,
                f"too many message attributes: {len(attrs) + 1} with Outflow's own and {ATTR_REDRIVEN}, "
                f"SQS allows {MAX_ATTRIBUTES} (and SNS passes on)",
            )
        size += len(ATTR_REDRIVEN) + len(_attr_type(ATTR_REDRIVEN)) + len(REDRIVEN_VALUE)
    if fifo:
        if not group:
            raise InvalidRowError(Kind.GROUP_REQUIRED, "a FIFO queue needs a message group, and the row has none")
        if not valid_id(group):
            raise InvalidRowError(Kind.INVALID_ID, f"invalid FIFO group or deduplication id: group {group!r} must be 1-128 ASCII letters, digits or punctuation")
        if not valid_id(key):
            raise InvalidRowError(Kind.INVALID_ID, f"invalid FIFO group or deduplication id: key {key!r} must be 1-128 ASCII letters, digits or punctuation")
    if size > limit:
        raise InvalidRowError(Kind.TOO_LARGE, f"message too large: {size} bytes with attributes, over {whose}{limit}-byte limit")


def _check_source(source: str) -> str | None:
    if len(source) > MAX_SOURCE_CHARS:
        return f"invalid event field: a source holds at most {MAX_SOURCE_CHARS} characters"
    if source.startswith("aws."):
        return f"invalid event field: source {source!r}: sources starting with aws. are AWS's own"
    return None


def _check_detail_type(detail_type: str) -> str | None:
    if len(detail_type) > MAX_DETAIL_TYPE_CHARS:
        return f"invalid event field: a detail-type holds at most {MAX_DETAIL_TYPE_CHARS} characters"
    return None


def _go_json(value: object) -> str:
    """JSON as Go's encoding/json writes it: compact, HTML characters and
    the line and paragraph separators escaped."""
    out = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    for ch, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        out = out.replace(ch, esc)
    return out


def check_event(key: str, payload: bytes, attributes: Mapping[str, str], attempt: int, t: Target) -> None:
    """Why EventBridge would refuse the row's event, if it would."""
    check_attributes(attributes)
    attrs = dict(attributes)
    source = attrs.pop(ATTR_SOURCE, t.source)
    detail_type = attrs.pop(ATTR_DETAIL_TYPE, t.detail_type)
    if not source:
        raise InvalidRowError(Kind.EVENT_FIELD, "invalid event field: no source: set the row's source attribute or the route's source option")
    if not detail_type:
        raise InvalidRowError(
            Kind.EVENT_FIELD, "invalid event field: no detail-type: set the row's detail-type attribute or the route's detail-type option"
        )
    for problem in (_check_source(source), _check_detail_type(detail_type)):
        if problem is not None:
            raise InvalidRowError(Kind.EVENT_FIELD, problem)
    meta: dict[str, object] = {"key": key, "attempt": attempt}
    trace = attrs.pop(ATTR_TRACE_PARENT, "")
    if trace:
        meta["traceparent"] = trace
    if attrs:
        meta["attributes"] = dict(sorted(attrs.items()))
    detail = _event_detail(payload, _go_json(meta))
    size = _utf8_len(source) + _utf8_len(detail_type) + len(detail)
    if size > MAX_EVENT_BYTES:
        raise InvalidRowError(
            Kind.TOO_LARGE, f"message too large: {size} bytes of source, detail-type and detail, over EventBridge's {MAX_EVENT_BYTES}-byte limit"
        )


def _not_json(why: str) -> InvalidRowError:
    return InvalidRowError(Kind.NOT_JSON, "payload is not a JSON object: " + why)


def _event_detail(payload: bytes, meta: str) -> bytes:
    """The detail, the outflow member first and the payload's bytes as
    they are."""
    trimmed = payload.lstrip(b" \t\r\n")
    try:
        payload.decode("utf-8")
    except UnicodeDecodeError:
        raise _not_json("an EventBridge event's detail must be one") from None
    if not trimmed or trimmed[:1] != b"{":
        raise _not_json("an EventBridge event's detail must be one")
    members = check_detail(payload.decode("utf-8"))
    return b'{"outflow":' + meta.encode("utf-8") + (b"," if members else b"") + trimmed[1:]


_WS = " \t\r\n"
_STRING = re.compile(r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"')
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")


def check_detail(text: str) -> int:
    """Reads a JSON object as PutEvents will and returns its member count:
    one whole JSON value, nested at most 1000 deep, whose integers fit in 64
    bits, without a top-level outflow member."""
    i, n = 0, len(text)
    stack: list[str] = []  # "{" or "["
    members = 0
    # expect: "value", "key" (or "}" when first), "colon", "next" ("," or close)
    expect = "value"
    first = False  # the container just opened: it may close at once
    done = False

    def skip(i: int) -> int:
        while i < n and text[i] in _WS:
            i += 1
        return i

    while True:
        i = skip(i)
        if i >= n:
            if done:
                return members
            raise _not_json("an EventBridge event's detail must be one: unexpected end of JSON input")
        if done:
            raise _not_json("an EventBridge event's detail must be one, with nothing after it")
        c = text[i]
        if expect == "next":
            if c == ",":
                i += 1
                expect = "key" if stack[-1] == "{" else "value"
                first = False
                continue
            if (c == "}" and stack[-1] == "{") or (c == "]" and stack[-1] == "["):
                stack.pop()
                i += 1
                if not stack:
                    done = True
                continue
            raise _not_json(f"invalid character {c!r} after a value")
        if expect == "colon":
            if c != ":":
                raise _not_json(f"invalid character {c!r} after an object key")
            i += 1
            expect = "value"
            continue
        if expect == "key":
            if c == "}" and first:
                stack.pop()
                i += 1
                if not stack:
                    done = True
                expect = "next"
                continue
            m = _STRING.match(text, i)
            if not m:
                raise _not_json(f"invalid character {c!r} looking for the beginning of an object key string")
            if len(stack) == 1:
                members += 1
                if json.loads(m.group(0)) == MEMBER_OUTFLOW:
                    raise _not_json('the payload has a top-level "outflow" member, which Outflow adds to every event')
            i = m.end()
            expect = "colon"
            continue
        # a value
        if c == "]" and first and stack and stack[-1] == "[":
            stack.pop()
            i += 1
            if not stack:
                done = True
            expect = "next"
            continue
        if c in "{[":
            stack.append(c)
            if len(stack) > MAX_DETAIL_DEPTH:
                raise _not_json(f"nested deeper than the {MAX_DETAIL_DEPTH} levels PutEvents reads")
            i += 1
            expect, first = ("key" if c == "{" else "value"), True
            continue
        first = False
        if c == '"':
            m = _STRING.match(text, i)
            if not m:
                raise _not_json("invalid string")
            i = m.end()
        elif c == "-" or "0" <= c <= "9":
            m = _NUMBER.match(text, i)
            if not m:
                raise _not_json("invalid number")
            if m.group(1) is None and m.group(2) is None and not INT64_MIN <= int(m.group(0)) <= INT64_MAX:
                raise _not_json(f"the integer {m.group(0)} is past the 64-bit range PutEvents accepts")
            i = m.end()
        else:
            for lit in ("true", "false", "null"):
                if text.startswith(lit, i):
                    i += len(lit)
                    break
            else:
                raise _not_json(f"invalid character {c!r} looking for beginning of value")
        if not stack:
            done = True
        expect = "next"


def validate(
    key: str, payload: bytes, attributes: Mapping[str, str], group: str, attempt: int, seq: int, t: Target, max_bytes: int
) -> None:
    """Why t would refuse the row, if it would."""
    if t.kind is TargetKind.EVENTBRIDGE:
        check_event(key, payload, attributes, attempt, t)
        return
    limit, whose = size_limit(t, max_bytes)
    check_message(key, payload, attributes, group, attempt, seq, t.fifo, limit, whose)


_TRACE_PARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?")
_XRAY_ROOT = re.compile(r"1-([0-9a-f]{8})-([0-9a-f]{24})")
_HEX16 = re.compile(r"[0-9a-f]{16}")


def trace_parent_problem(s: str) -> str | None:
    """Why s is not a W3C traceparent, if it is not."""
    m = _TRACE_PARENT.fullmatch(s)
    if m is None or m.group(1) == "ff":
        return f"{s!r} is not a W3C traceparent (version-traceid-parentid-flags in lower-case hex)"
    if m.group(1) == "00" and m.group(5) is not None:
        return f"{s!r}: a version 00 traceparent has four fields"
    if m.group(2) == "0" * 32 or m.group(3) == "0" * 16:
        return f"{s!r}: the trace and parent ids may not be all zeros"
    return None


def trace_parent_from_xray(header: str) -> str:
    """An X-Ray trace header as a W3C traceparent; "" when it has no Root
    and Parent."""
    root = parent = sampled = ""
    for part in header.split(";"):
        k, _, v = part.strip().partition("=")
        if k == "Root":
            root = v
        elif k == "Parent":
            parent = v
        elif k == "Sampled":
            sampled = v
    m = _XRAY_ROOT.fullmatch(root)
    if m is None or not _HEX16.fullmatch(parent):
        return ""
    tp = f"00-{m.group(1)}{m.group(2)}-{parent}-{'01' if sampled == '1' else '00'}"
    return tp if trace_parent_problem(tp) is None else ""
