"""Review 49, finding R49-1: the frozen 0.1.0 messages hold closing
messages in only one of the forms the 0.1.0 dispatcher sent them: reason
``purged``, on an SQS FIFO queue route. A closing message through an SNS
FIFO topic's JSON envelope, and one for a dead letter under ``skip``
(``dead-letter``), are not frozen, so no compat test in Go, Python or
TypeScript can notice a change that stops reading them (demonstrated:
dropping ``outflow.closed`` from the SNS envelope's attributes in
_decode._sns_attributes leaves tests/test_compat.py green).

Every release's messages.json must freeze a closing message in each
envelope that can carry one (sqs, which an SNS topic's raw subscription
gives too, and sns) for each reason 0.1.0 wrote (dead-letter, purged),
as received and as a Lambda record. Go's
TestCompat_EveryReleaseFreezesEachFormOfClosingMessage and
typescript/test/compat.test.ts hold the same."""

from __future__ import annotations

import json

from vectors import ROOT

COMPAT = ROOT / "conformance" / "compat"


def test_every_release_freezes_each_form_of_closing_message() -> None:
    releases = sorted(p for p in COMPAT.iterdir() if p.is_dir())
    assert releases
    for release in releases:
        vectors = json.loads((release / "messages.json").read_text())["vectors"]
        closing = [v["want"] for v in vectors if v["want"].get("closed")]
        envelopes = {w["envelope"] for w in closing}
        reasons = {w["closed"] for w in closing}
        assert envelopes >= {"sqs", "sns"}, (
            f"{release.name}: closing messages frozen only in envelopes {sorted(envelopes)}; "
            "an SNS-envelope closing message is what an ordered topic's raw-off subscriber reads")
        assert reasons >= {"dead-letter", "purged"}, (
            f"{release.name}: closing messages frozen only for reasons {sorted(reasons)}")


def test_every_release_freezes_each_reason_in_each_envelope_and_shape() -> None:
    for release in sorted(p for p in COMPAT.iterdir() if p.is_dir()):
        vectors = json.loads((release / "messages.json").read_text())["vectors"]
        forms = {(v["shape"], v["want"]["envelope"], v["want"]["closed"]) for v in vectors if v["want"].get("closed")}
        for shape in ("sdk", "lambda"):
            for envelope in ("sqs", "sns"):
                for reason in ("dead-letter", "purged"):
                    assert (shape, envelope, reason) in forms, (
                        f"{release.name}: no closing message of reason {reason} in the {envelope} envelope ({shape}); "
                        f"frozen: {sorted(forms)}")
