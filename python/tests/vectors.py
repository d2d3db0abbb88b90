"""Reads the shared conformance vectors (conformance/producer/*.json):
what they hold is described in conformance/README.md."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import outflowhq

ROOT = Path(__file__).resolve().parents[2]
PRODUCER = ROOT / "conformance" / "producer"


def load(name: str) -> list[dict[str, Any]]:
    """The vectors of one file; a missing or empty file fails the suite."""
    path = PRODUCER / name
    data = json.loads(path.read_text())
    vectors = data["vectors"]
    assert isinstance(vectors, list) and vectors, f"{path}: no vectors"
    return vectors


def payload(spec: Mapping[str, Any]) -> bytes:
    """A payload as a vector writes it: text, base64, text or base64
    repeated, or parts of these joined."""
    if "parts" in spec:
        return b"".join(payload(p) for p in spec["parts"])
    if "repeat_base64" in spec:
        return base64.b64decode(spec["repeat_base64"]) * int(spec["times"])
    if "text" in spec:
        return str(spec["text"]).encode("utf-8")
    if "base64" in spec:
        return base64.b64decode(spec["base64"])
    return str(spec["repeat"]).encode("utf-8") * int(spec["times"])


def rows(v: Mapping[str, Any]) -> list[outflowhq.Row]:
    """The vector's rows, repeated v["repeat"] times when it says so."""
    out = [row(r) for r in v["rows"]]
    return out * int(v.get("repeat", 1))


def row(r: Mapping[str, Any]) -> outflowhq.Row:
    nb = r.get("not_before_ms")
    return outflowhq.Row(
        key=r.get("key", ""),
        queue=r["queue"],
        payload=payload(r["payload"]),
        attributes=dict(r["attributes"]) if "attributes" in r else None,
        group=r.get("group", ""),
        not_before=datetime.fromtimestamp(nb / 1000, tz=timezone.utc) if nb is not None else None,
        trace_parent=r.get("trace_parent", ""),
    )


def config(c: Mapping[str, Any]) -> outflowhq.Config:
    return outflowhq.Config(
        table=c.get("table", ""),
        shards=c.get("shards", 0),
        max_message_bytes=c.get("max_message_bytes", 0),
        ordered=c.get("ordered"),
        routes=c.get("routes"),
        lean=bool(c.get("lean", False)),
    )


def to_boto(v: Any) -> Any:
    """DynamoDB JSON as the vectors write it (B in base64) to boto3's form
    (B as bytes), for a value, an item, or a transaction item."""
    if isinstance(v, dict):
        if len(v) == 1 and "B" in v and isinstance(v["B"], str):
            return {"B": base64.b64decode(v["B"])}
        if len(v) == 1 and "BS" in v:
            return {"BS": [base64.b64decode(b) for b in v["BS"]]}
        return {k: to_boto(e) for k, e in v.items()}
    if isinstance(v, list):
        return [to_boto(e) for e in v]
    return v


def from_boto(v: Any) -> Any:
    """boto3's form back to the vectors' DynamoDB JSON."""
    if isinstance(v, (bytes, bytearray)):
        return base64.b64encode(bytes(v)).decode("ascii")
    if isinstance(v, dict):
        return {k: from_boto(e) for k, e in v.items()}
    if isinstance(v, (list, tuple)):
        return [from_boto(e) for e in v]
    return v


_TOKEN = re.compile(r"[#:][A-Za-z0-9_]+")


def resolve(expr: str, names: Mapping[str, str] | None, values: Mapping[str, Any] | None, readable: bool = False) -> str:
    """An expression with its placeholders replaced (#n by the name, :v by
    the value: a string quoted as JSON, a number as it is), without
    whitespace outside strings: what the vectors compare."""
    names, values = names or {}, values or {}

    def sub(m: re.Match[str]) -> str:
        tok = m.group(0)
        if tok.startswith("#"):
            return names[tok]
        v = values[tok]
        if "S" in v:
            return json.dumps(v["S"])
        return str(v["N"])

    out = _TOKEN.sub(sub, expr)
    return " ".join(out.split()) if readable else canonical(out)


def canonical(expr: str) -> str:
    """expr without whitespace outside double-quoted strings."""
    out, quoted, escaped = [], False, False
    for ch in expr:
        if quoted:
            out.append(ch)
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                quoted = False
        elif ch == '"':
            quoted = True
            out.append(ch)
        elif not ch.isspace():
            out.append(ch)
    return "".join(out)


def shape(item: Mapping[str, Any], readable: bool = False) -> dict[str, Any]:
    """A transaction item as the vectors compare it: the table, the item or
    key in DynamoDB JSON, the expressions resolved, the return values."""
    ((op, body),) = item.items()
    out: dict[str, Any] = {"TableName": body["TableName"]}
    if "Item" in body:
        out["Item"] = from_boto(body["Item"])
    if "Key" in body:
        out["Key"] = from_boto(body["Key"])
    names, values = body.get("ExpressionAttributeNames"), from_boto(body.get("ExpressionAttributeValues"))
    for field in ("ConditionExpression", "UpdateExpression"):
        if field in body:
            out[field] = resolve(body[field], names, values, readable)
    if "ReturnValuesOnConditionCheckFailure" in body:
        out["ReturnValuesOnConditionCheckFailure"] = body["ReturnValuesOnConditionCheckFailure"]
    return {op: out}


def expected_shape(item: Mapping[str, Any]) -> dict[str, Any]:
    """A vector's expected transaction item, its expressions canonical."""
    ((op, body),) = item.items()
    out = dict(body)
    for field in ("ConditionExpression", "UpdateExpression"):
        if field in out:
            out[field] = canonical(out[field])
    return {op: out}


STAGE_ID = re.compile(r"[A-Z2-7]{16}")
ULID = re.compile(r"[0-7][0-9A-HJKMNP-TV-Z]{25}")


def check_volatile(actual: dict[str, Any], expected: Mapping[str, Any]) -> None:
    """Checks a stored item's created_at, due_at and stage_id by their
    rules, then takes the expected values where the vector leaves them open
    ("*"), so the rest compares exactly."""
    assert STAGE_ID.fullmatch(actual["stage_id"]["S"]), actual["stage_id"]
    created = int(actual["created_at"]["N"])
    not_before = int(actual.get("not_before", {"N": "0"})["N"])
    assert int(actual["due_at"]["N"]) == max(created, not_before)
    for name in ("created_at", "due_at", "stage_id"):
        e = expected.get(name)
        if isinstance(e, Mapping) and "*" in e.values():
            actual[name] = dict(e)
