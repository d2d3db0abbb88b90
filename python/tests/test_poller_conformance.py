"""The receive loop held to conformance/consumer/poller.json, which the Go
and TypeScript suites read too (consume/poller_conformance_test.go,
typescript/test/poller-conformance.test.ts): messages sent to a fresh moto
queue as Outflow sends them, consumed by a Poller bound to an Inbox
(Inbox.poller) until it has given every result the scenario counts, then
stopped; what it counted, committed and left in the queue is checked."""

from __future__ import annotations

import json
import threading
import time
from typing import TYPE_CHECKING, Any

import pytest

from conftest import create_queue, queue_counts
from outflowhq import consume
from test_consume_conformance import effect as scenario_effect
from vectors import ROOT

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

POLLER = ROOT / "conformance" / "consumer" / "poller.json"
#: How long a scenario may take to give its results: seconds on an idle
#: machine, generous for a loaded one.
DEADLINE = 120.0


def _scenarios() -> list[dict[str, Any]]:
    """The scenarios, or none when the file is gone (which
    test_the_poller_scenarios_are_all_there fails, rather than the whole
    module failing to load)."""
    if not POLLER.is_file():
        return []
    out = json.loads(POLLER.read_text())["scenarios"]
    assert isinstance(out, list)
    return out


SCENARIOS = _scenarios()


def test_the_poller_scenarios_are_all_there() -> None:
    assert POLLER.is_file(), f"{POLLER} is missing"
    assert len(SCENARIOS) >= 4, "poller.json has fewer scenarios than it had"
    for o in consume.Outcome:
        assert any(sc["want"]["outcomes"].get(o.value, 0) > 0 for sc in SCENARIOS), f"no scenario gives {o.value}"
    assert any(sc.get("stop_at") for sc in SCENARIOS), "no scenario stops mid-batch"
    assert any(sc["queue"] == "standard" for sc in SCENARIOS), "no scenario on a standard queue"
    assert any(sc["queue"] == "fifo" for sc in SCENARIOS), "no scenario on a FIFO queue"


def send(sqs: Any, url: str, fifo: bool, m: dict[str, Any]) -> None:
    """Send m as Outflow sends a row's message: the key, attempt, place and
    closing reason as message attributes; on a FIFO queue the group and
    the key (with -closed for a closing message) as deduplication id."""
    attrs: dict[str, Any] = {
        "outflow.key": {"DataType": "String", "StringValue": m["key"]},
        "outflow.attempt": {"DataType": "Number", "StringValue": "1"},
    }
    if m.get("seq"):
        attrs["outflow.seq"] = {"DataType": "Number", "StringValue": str(m["seq"])}
    dedup = m["key"]
    if m.get("closed"):
        attrs["outflow.closed"] = {"DataType": "String", "StringValue": m["closed"]}
        dedup += "-closed"
    kwargs: dict[str, Any] = {"QueueUrl": url, "MessageBody": json.dumps({"key": m["key"]}), "MessageAttributes": attrs}
    if fifo:
        kwargs.update(MessageGroupId=m["group"], MessageDeduplicationId=dedup)
    sqs.send_message(**kwargs)


def inbox_for(dynamodb: DynamoDBClient, table: str, config: dict[str, str]) -> consume.Inbox:
    return consume.Inbox(
        dynamodb,
        table,
        "c1",
        gaps=consume.GapPolicy.PASS if config["gaps"] == "pass" else consume.GapPolicy.WAIT,
        late=consume.LatePolicy.APPLY if config["late"] == "apply" else consume.LatePolicy.RECORD,
        join=consume.JoinPolicy.WHERE_SEEN if config["join"] == "where_seen" else consume.JoinPolicy.FROM_START,
    )


def effects(dynamodb: DynamoDBClient, table: str) -> list[str]:
    """The keys whose effect committed, sorted."""
    item = dynamodb.get_item(TableName=table, Key={"pk": {"S": "effects"}}, ConsistentRead=True).get("Item")
    return sorted(v["S"] for v in item["history"]["L"]) if item else []


def counted(counts: consume.Counts) -> dict[str, int]:
    """The outcomes counted, as a scenario writes them (0s left out)."""
    return {o.value: counts.of(o) for o in consume.Outcome if counts.of(o)}


@pytest.mark.live
@pytest.mark.parametrize("sc", SCENARIOS, ids=[sc["name"] for sc in SCENARIOS])
def test_poller_scenario(dynamodb: DynamoDBClient, sqs: Any, inbox_table: str, sc: dict[str, Any]) -> None:
    inbox = inbox_for(dynamodb, inbox_table, sc["config"])
    # The inbox's state before the queue's messages.
    for b in sc["before"]:
        m = consume.Message(key=b["key"], group=b.get("group", ""), seq=b.get("seq", 0), attempt=1)
        inbox.apply(m, [scenario_effect(inbox_table, m.key)])

    fifo = sc["queue"] == "fifo"
    url = create_queue(sqs, fifo)
    try:
        for m in sc["send"]:
            send(sqs, url, fifo, m)

        want = sum(sc["want"]["outcomes"].values())
        counts = consume.Counts()
        all_in = threading.Event()
        fail, stop_at = set(sc["fail"]), sc.get("stop_at")

        def on_result(r: consume.Result) -> None:
            counts.add(r)  # never called concurrently: no lock needed
            if counts.total >= want:
                all_in.set()

        def effect(m: consume.Message) -> list[dict[str, Any]]:
            if m.key == stop_at:
                poller.stop()  # asked for while this effect runs, which then completes
            if m.key in fail:
                raise RuntimeError("the effect failed")
            return [scenario_effect(inbox_table, m.key)]

        poller = inbox.poller(sqs, url, effect, wait=1, visibility=30, concurrency=sc.get("concurrency", 0), on_result=on_result)
        raised: list[BaseException] = []

        def run() -> None:
            try:
                poller.run()
            except BaseException as e:
                raised.append(e)

        t = threading.Thread(target=run, daemon=True)
        t.start()
        deadline = time.monotonic() + DEADLINE
        while not all_in.is_set() and t.is_alive() and time.monotonic() < deadline:
            all_in.wait(0.1)
        if not all_in.is_set():
            assert stop_at and not t.is_alive(), f"the poller gave {counts.total} of {want} results: {counts}"
        poller.stop()
        t.join(DEADLINE)
        assert not t.is_alive(), "the poller did not return once stopped"
        assert not raised, raised

        assert counted(counts) == sc["want"]["outcomes"], "outcomes"
        assert effects(dynamodb, inbox_table) == sc["want"]["effects"], "effects"
        assert queue_counts(sqs, url) == (sc["want"]["visible"], sc["want"]["in_flight"]), "(visible, in flight)"
    finally:
        sqs.delete_queue(QueueUrl=url)
