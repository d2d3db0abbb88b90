"""Every earlier release's messages (conformance/compat/*/messages.json,
frozen from what that release's dispatcher sent) decode with this
package's consume as they did with that release's Go consume package: a
consumer upgraded to this version reads what an older dispatcher sent.
Go's internal/compat tests hold the Go side; docs/compatibility.md says
what is promised."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from outflowhq import consume
from vectors import ROOT

COMPAT = ROOT / "conformance" / "compat"
RELEASES = sorted(p for p in COMPAT.iterdir() if p.is_dir())
VECTORS = [
    (release.name, v)
    for release in RELEASES
    for v in json.loads((release / "messages.json").read_text())["vectors"]
]


def test_every_release_has_messages() -> None:
    assert RELEASES, f"no release under {COMPAT}"
    for release in RELEASES:
        names = [v["name"] for r, v in VECTORS if r == release.name]
        assert names, f"{release.name}: no messages"
        envelopes = {v["want"]["envelope"] for r, v in VECTORS if r == release.name}
        assert envelopes == {"sqs", "sns", "eventbridge"}, release.name


def _decode(v: dict[str, Any]) -> consume.Message:
    if v["shape"] == "lambda":
        return consume.from_lambda(v["record"])
    msg = json.loads(json.dumps(v["message"]))
    for a in msg.get("MessageAttributes", {}).values():
        if "BinaryValue" in a:
            a["BinaryValue"] = base64.b64decode(a["BinaryValue"])  # boto3 gives bytes
    return consume.from_queue(v["queue_url"], msg)


def _payload(spec: dict[str, str]) -> bytes:
    if "base64" in spec:
        return base64.b64decode(spec["base64"])
    return spec["text"].encode("utf-8")


@pytest.mark.parametrize("release,v", VECTORS, ids=[f"{r}-{v['name']}" for r, v in VECTORS])
def test_an_earlier_release_message_decodes_as_it_did(release: str, v: dict[str, Any]) -> None:
    m = _decode(v)
    w = v["want"]
    got = {
        "key": m.key,
        "route": m.route,
        "group": m.group,
        "seq": m.seq,
        "closed": m.closed,
        "attempt": m.attempt,
        "payload": m.payload,
        "attributes": m.attributes,
        "trace_parent": m.trace_parent,
        "envelope": str(m.envelope),
        "message_id": m.message_id,
        "receipt_handle": m.receipt_handle,
    }
    assert got == {**w, "payload": _payload(w["payload"])}, release
