"""The consumer's half held to the shared vectors in conformance/consumer
(decode.json offline; inbox.json on the project's patched moto server), as
consume/conformance_test.go holds Go's consume package to them."""

from __future__ import annotations

import base64
import json
import logging
from typing import TYPE_CHECKING, Any

import pytest

from outflowhq import consume
from vectors import ROOT

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

CONSUMER = ROOT / "conformance" / "consumer"


def _load(name: str, member: str) -> list[dict[str, Any]]:
    data = json.loads((CONSUMER / name).read_text())
    out = data[member]
    assert isinstance(out, list) and out, f"{name}: no {member}"
    return out


DECODE = _load("decode.json", "vectors")
INBOX = _load("inbox.json", "scenarios")


def test_the_consumer_vectors_are_all_there() -> None:
    assert len(DECODE) >= 88
    assert len(INBOX) >= 34
    assert {v["shape"] for v in DECODE} == {"lambda", "sdk"}
    assert {v["want"]["envelope"] for v in DECODE if "want" in v} == {"sqs", "sns", "eventbridge"}
    errors = {(v["error"]["kind"], v["error"]["envelope"]) for v in DECODE if "error" in v}
    assert {k for k, _ in errors} == {"not_outflow", "malformed"}
    assert {e for _, e in errors} >= {"", "sqs", "sns", "eventbridge"}
    assert any(v["want"]["closed"] for v in DECODE if "want" in v)
    for env in ("sqs", "sns", "eventbridge"):
        assert any(v["want"].get("redriven") and v["want"]["envelope"] == env for v in DECODE if "want" in v), f"a redriven {env} message"
    assert any(sc["config"]["join"] == "where_seen" and any(s.get("message", {}).get("redriven") for s in sc["steps"]) for sc in INBOX)
    outcomes = {s["outcome"] for sc in INBOX for s in sc["steps"] if "outcome" in s}
    assert outcomes >= {"applied", "duplicate", "gap", "late", "closed", "no_group"}
    configs = {(sc["config"]["gaps"], sc["config"]["late"], sc["config"]["join"]) for sc in INBOX}
    assert {c[0] for c in configs} == {"wait", "pass"} and {c[1] for c in configs} == {"record", "apply"}
    assert {c[2] for c in configs} == {"from_start", "where_seen"}
    assert all(sc.get("exact") for sc in INBOX)


def _payload(spec: dict[str, str]) -> bytes:
    if "base64" in spec:
        return base64.b64decode(spec["base64"])
    return spec["text"].encode("utf-8")


def _decode(v: dict[str, Any]) -> consume.Message:
    if v["shape"] == "lambda":
        return consume.from_lambda(v["record"])
    msg = json.loads(json.dumps(v["message"]))
    for a in msg.get("MessageAttributes", {}).values():
        if "BinaryValue" in a:
            a["BinaryValue"] = base64.b64decode(a["BinaryValue"])  # boto3 gives bytes
    if "queue_url" in v:
        return consume.from_queue(v["queue_url"], msg)
    return consume.from_sqs(msg)


@pytest.mark.parametrize("v", DECODE, ids=[v["name"] for v in DECODE])
def test_decode(v: dict[str, Any]) -> None:
    if "error" in v:
        with pytest.raises(consume.DecodeError) as info:
            _decode(v)
        assert info.value.kind == v["error"]["kind"], str(info.value)
        assert (info.value.envelope or "") == v["error"]["envelope"], str(info.value)
        return
    m = _decode(v)
    w = v["want"]
    got = {
        "key": m.key,
        "route": m.route,
        "group": m.group,
        "seq": m.seq,
        "closed": m.closed,
        "attempt": m.attempt,
        "redriven": m.redriven,
        "payload": m.payload,
        "attributes": m.attributes,
        "trace_parent": m.trace_parent,
        "envelope": str(m.envelope),
        "message_id": m.message_id,
        "receipt_handle": m.receipt_handle,
    }
    assert got == {"redriven": False, **w, "payload": _payload(w["payload"])}


# Inbox scenarios, live.


def effect(table: str, key: str) -> dict[str, Any]:
    """The scenarios' effect: append the message's key to one item's list."""
    return {
        "Update": {
            "TableName": table,
            "Key": {"pk": {"S": "effects"}},
            "UpdateExpression": "SET #h = list_append(if_not_exists(#h, :empty), :k)",
            "ExpressionAttributeNames": {"#h": "history"},
            "ExpressionAttributeValues": {":empty": {"L": []}, ":k": {"L": [{"S": key}]}},
        }
    }


def outcome(op: str, error: BaseException | None) -> tuple[str, int | None]:
    if error is None:
        return ("closed" if op == "close" else "applied"), None
    if isinstance(error, consume.OrderError):
        return error.kind, error.cursor
    if isinstance(error, consume.LateError):
        return "late", error.order.cursor if error.order else None
    if isinstance(error, consume.ConsumeError):
        return error.kind, None
    raise error


def expect_value(want: Any) -> Any:
    if isinstance(want, bool):
        return {"BOOL": want}
    if isinstance(want, int):
        return {"N": str(want)}
    return {"S": want}


def run_scenario(client: DynamoDBClient, table: str, sc: dict[str, Any]) -> None:
    cfg = sc["config"]
    inbox = consume.Inbox(
        client,
        table,
        "c1",
        gaps=consume.GapPolicy.PASS if cfg["gaps"] == "pass" else consume.GapPolicy.WAIT,
        late=consume.LatePolicy.APPLY if cfg["late"] == "apply" else consume.LatePolicy.RECORD,
        join=consume.JoinPolicy.WHERE_SEEN if cfg["join"] == "where_seen" else consume.JoinPolicy.FROM_START,
    )
    for i, step in enumerate(sc["steps"]):
        if step["op"] == "delete":
            client.delete_item(TableName=table, Key={"pk": {"S": step["pk"]}})
            continue
        mv = step["message"]
        m = consume.Message(key=mv["key"], group=mv.get("group", ""), seq=mv.get("seq", 0), closed=mv.get("closed", ""), redriven=mv.get("redriven", False), attempt=1)
        error: BaseException | None = None
        try:
            if step["op"] == "close":
                inbox.close(m)
            else:
                inbox.apply(m, [effect(table, m.key)])
        except consume.ConsumeError as e:
            error = e
        kind, cursor = outcome(step["op"], error)
        assert kind == step["outcome"], f"step {i}: {error}"
        if "cursor" in step:
            assert cursor == step["cursor"], f"step {i}: {error}"
    item = client.get_item(TableName=table, Key={"pk": {"S": "effects"}}, ConsistentRead=True).get("Item")
    history = [v["S"] for v in item["history"]["L"]] if item else []
    assert history == sc["effects"]
    for pk, want in sc["items"].items():
        got: Any = client.get_item(TableName=table, Key={"pk": {"S": pk}}, ConsistentRead=True).get("Item")
        if want is None:
            assert got is None, f"{pk}: {got}"
            continue
        assert got is not None, f"{pk} is missing"
        if sc.get("exact"):
            assert set(got) - {"pk", "at"} == {n for n, v in want.items() if v is not None}, f"{pk}: {got}"
            assert "N" in got["at"]
        for name, value in want.items():
            if value is None:
                assert name not in got, f"{pk}.{name}: {got}"
            else:
                assert got.get(name) == expect_value(value), f"{pk}.{name}: {got}"


@pytest.mark.live
@pytest.mark.parametrize("sc", INBOX, ids=[sc["name"] for sc in INBOX])
def test_inbox_scenario(dynamodb: DynamoDBClient, inbox_table: str, sc: dict[str, Any]) -> None:
    run_scenario(dynamodb, inbox_table, sc)


# The Lambda handler (conformance/consumer/handler.json).

HANDLER = _load("handler.json", "batches")


def test_the_handler_vectors_are_all_there() -> None:
    assert len(HANDLER) >= 13
    results = {r for b in HANDLER for r in b["results"].values()}
    assert results >= {"error", "gap", "duplicate", "late"}
    assert any(b["failures"] for b in HANDLER) and any(not b["failures"] for b in HANDLER)
    assert any(not b["closed_hook"] for b in HANDLER)
    # Every batch counts its outcomes, and one holds each.
    assert all(b.get("outcomes") for b in HANDLER), [b["name"] for b in HANDLER if not b.get("outcomes")]
    assert any(all(b["outcomes"].get(o.value, 0) > 0 for o in consume.Outcome) for b in HANDLER), "no batch holds every outcome"


def _result(batch: dict[str, Any], key: str) -> None:
    r = batch["results"].get(key)
    if r == "error":
        raise RuntimeError("the effect failed")
    if r == "gap":
        raise consume.OrderError(key, "g1", 2, 0)
    if r == "duplicate":
        raise consume.DuplicateError("already applied")
    if r == "late":
        raise consume.LateError("recorded late", consume.OrderError(key, "g1", 1, 5))


@pytest.mark.parametrize("batch", HANDLER, ids=[b["name"] for b in HANDLER])
def test_handler(batch: dict[str, Any]) -> None:
    calls: list[str] = []
    reported: list[tuple[str, BaseException]] = []

    def apply(m: consume.Message) -> None:
        calls.append(m.key)
        _result(batch, m.key)

    def closed(m: consume.Message) -> None:
        calls.append("closed:" + m.key)
        _result(batch, m.key)

    counts = consume.Counts()
    results: list[consume.Result] = []
    lines: list[str] = []

    def on_result(r: consume.Result) -> None:
        counts.add(r)
        results.append(r)

    handler = consume.Handler(apply, closed if batch["closed_hook"] else None, on_failure=lambda i, e: reported.append((i, e)),
                              on_result=on_result, metrics=lines.append, logger=logging.getLogger("test.handler"))
    resp = handler.handle({"Records": batch["records"]})
    assert [f["itemIdentifier"] for f in resp["batchItemFailures"]] == batch["failures"]
    assert calls == batch["calls"]
    assert [i for i, _ in reported] == batch["failures"]

    # One result per record, in order; the ones not done are the failures.
    assert [r.message_id for r in results] == [r["messageId"] for r in batch["records"]]
    assert [r.message_id for r in results if not r.outcome.done] == batch["failures"]
    assert all((r.error is None) == (r.outcome in (consume.Outcome.APPLIED, consume.Outcome.CLOSED)) for r in results), results
    want = batch["outcomes"]
    assert {o.value: counts.of(o) for o in consume.Outcome if counts.of(o)} == want, "the outcomes on_result heard"
    line = batch_line(lines, batch["records"][0]["eventSourceARN"].rsplit(":", 1)[-1])
    for o in consume.Outcome:
        assert line[o.metric] == want.get(o.value, 0), f"the EMF line's {o.metric}"


def batch_line(lines: list[str], queue: str) -> dict[str, Any]:
    """The EMF line of a Handler's batch among the lines written (a
    closing message with no hook adds its own): the one that counts
    Applied, with every outcome's metric declared."""
    found = [doc for doc in map(json.loads, lines) if "Applied" in doc]
    assert len(found) == 1, f"one batch line: {lines}"
    doc: dict[str, Any] = found[0]
    assert doc["Queue"] == queue, "its Queue dimension"
    (spec,) = doc["_aws"]["CloudWatchMetrics"]
    assert spec["Namespace"] == consume.METRIC_NAMESPACE and spec["Dimensions"] == [["Queue"]]
    assert spec["Metrics"] == [{"Name": o.metric, "Unit": "Count"} for o in consume.Outcome]
    assert [o.metric for o in consume.Outcome] == ["Applied", "Closed", "Duplicate", "Late", "Gap", "Failed", "Skipped"]
    return doc


class _Record:
    """What Powertools gives a record handler: an SQSRecord, whose
    raw_event is Lambda's record."""

    def __init__(self, raw: dict[str, Any]) -> None:
        self.raw_event = raw


def test_record_handler_for_powertools() -> None:
    batch = next(b for b in HANDLER if b["name"] == "duplicate-and-late-are-done")
    calls: list[str] = []

    def apply(m: consume.Message) -> None:
        calls.append(m.key)
        _result(batch, m.key)

    results: list[consume.Result] = []
    handle = consume.record_handler(apply, on_result=results.append)
    for r in batch["records"]:
        handle(_Record(r))  # done: no exception
    assert calls == ["a", "b", "c"]
    assert [(r.message_id, r.outcome) for r in results] == [
        ("id-a", consume.Outcome.DUPLICATE), ("id-b", consume.Outcome.LATE), ("id-c", consume.Outcome.APPLIED)
    ], "done, and reported as what they are"
    failing = next(b for b in HANDLER if b["name"] == "fifo-gap-is-a-failure")
    with pytest.raises(consume.OrderError):
        consume.record_handler(lambda m: _result(failing, m.key))(failing["records"][0])
    with pytest.raises(consume.DecodeError):
        handle({"messageId": "x", "body": "hello", "eventSourceARN": "arn:aws:sqs:us-east-1:1:q"})
    assert results[-1].message is None and results[-1].outcome == consume.Outcome.FAILED
    assert isinstance(results[-1].error, consume.DecodeError)


def test_handler_stops_when_out_of_time() -> None:
    class Context:
        def get_remaining_time_in_millis(self) -> int:
            return 100

    batch = HANDLER[0]
    calls: list[str] = []
    counts = consume.Counts()
    lines: list[str] = []
    handler = consume.Handler(lambda m: calls.append(m.key), reserve_ms=1000, on_result=counts.add, metrics=lines.append)
    resp = handler.handle({"Records": batch["records"]}, Context())
    assert calls == [] and len(resp["batchItemFailures"]) == len(batch["records"])
    assert counts == consume.Counts(skipped=len(batch["records"])), "not started: skipped"
    assert batch_line(lines, "orders.fifo")["Skipped"] == len(batch["records"])


# Idempotency, live.


@pytest.mark.live
def test_idempotency(dynamodb: DynamoDBClient, inbox_table: str) -> None:
    now = [1_700_000_000.0]
    idem = consume.Idempotency(dynamodb, inbox_table, "c1", hold=30, ttl=3600, clock=lambda: now[0])
    m = consume.Message(key="k1", attempt=1)
    runs: list[str] = []
    def first() -> str:
        runs.append("first")
        return "done"

    assert idem.do(m, first) == "done"
    with pytest.raises(consume.DuplicateError):
        idem.do(m, lambda: runs.append("again"))
    assert runs == ["first"]
    item = dynamodb.get_item(TableName=inbox_table, Key={"pk": {"S": "idempotency c1 k1"}}, ConsistentRead=True)["Item"]
    assert item["status"] == {"S": "completed"} and "held_until" not in item and item["expires_at"] == {"N": str(int(now[0]) + 3600)}

    # A failed effect releases its record: the retry runs it.
    m2 = consume.Message(key="k2", attempt=1)

    def boom() -> None:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        idem.do(m2, boom)
    idem.do(m2, lambda: runs.append("retry"))
    assert runs[-1] == "retry"

    # A copy that arrives while another holds the record is refused; past
    # the hold, it takes over, and the first copy's completion is lost.
    m3 = consume.Message(key="k3", attempt=1)

    def overlapping() -> None:
        with pytest.raises(consume.InProgressError):
            idem.do(m3, lambda: runs.append("second copy"))
        now[0] += 31
        idem.do(m3, lambda: runs.append("taken over"))

    with pytest.raises(consume.HoldLostError):
        idem.do(m3, overlapping)
    assert runs[-1] == "taken over" and "second copy" not in runs


@pytest.mark.live
def test_handler_with_inbox_on_fifo(dynamodb: DynamoDBClient, inbox_table: str) -> None:
    """Handler + Inbox end to end: a gap fails its group's later messages;
    the redelivery applies them in order."""
    inbox = consume.Inbox(dynamodb, inbox_table, "c1")
    batch = next(b for b in HANDLER if b["name"] == "fifo-gap-is-a-failure")  # places 2, 3 of g1
    handler = consume.Handler(lambda m: inbox.apply(m, [effect(inbox_table, m.key)]), inbox.close)
    assert [f["itemIdentifier"] for f in handler.handle({"Records": batch["records"]})["batchItemFailures"]] == ["id-b", "id-c"]
    first = next(b for b in HANDLER if b["name"] == "fifo-later-failure-keeps-earlier")["records"][0]  # a, place 1 of g1
    assert handler.handle({"Records": [first, *batch["records"]]}) == {"batchItemFailures": []}
    item = dynamodb.get_item(TableName=inbox_table, Key={"pk": {"S": "effects"}}, ConsistentRead=True)["Item"]
    assert [v["S"] for v in item["history"]["L"]] == ["a", "b", "c"]
