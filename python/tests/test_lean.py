"""Lean staging: with a dispatcher that publishes ``lean``, unordered rows
due at once are staged with no shard (outside the due index), as Go's
producer with Config.Lean; ordered and delayed rows keep theirs."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

import outflowhq
from fakes import FakeDynamoDB


def published(lean: Any) -> dict[str, Any]:
    item: dict[str, Any] = {
        "pk": {"S": "config dispatcher"},
        "format": {"N": "1"},
        "routes": {"M": {"orders": {"S": "https://sqs.us-east-1.amazonaws.com/1/orders"},
                         "events.fifo": {"S": "https://sqs.us-east-1.amazonaws.com/1/events.fifo"}}},
        "ordered": {"M": {"events.fifo": {"S": "block"}}},
        "shards": {"N": "4"},
        "max_message_bytes": {"N": "262144"},
        "revision": {"N": "1"},
        "published_at": {"N": "1800000000000"},
    }
    if lean is not None:
        item["lean"] = lean
    return item


@pytest.mark.parametrize(
    ("value", "lean"),
    [(None, False), ({"BOOL": True}, True), ({"BOOL": False}, False), ({"S": "true"}, False)],
)
def test_the_mode_is_read_from_what_the_dispatcher_publishes(value: Any, lean: bool) -> None:
    pub = outflowhq.decode_published("outbox", published(value))
    assert pub.lean is lean
    assert pub.apply().lean is lean


def test_lean_the_dispatcher_does_not_run_is_a_mismatch() -> None:
    pub = outflowhq.decode_published("outbox", published(None))
    with pytest.raises(outflowhq.ConfigError) as e:
        pub.apply(outflowhq.Config(lean=True))
    assert e.value.kind == outflowhq.Kind.PUBLISHED_MISMATCH
    assert "lean" in str(e.value)


@pytest.mark.parametrize("lean", [True, False])
def test_only_unordered_rows_due_at_once_are_staged_outside_the_due_index(lean: bool) -> None:
    client = FakeDynamoDB([published({"BOOL": lean})])
    cfg = outflowhq.decode_published("outbox", published({"BOOL": lean})).apply()
    producer = outflowhq.Producer(client, cfg, trace_parent=lambda: "")
    now = outflowhq.Row(key="now", queue="orders", payload="a")
    later = outflowhq.Row(key="later", queue="orders", payload="b",
                        not_before=datetime.now(timezone.utc) + timedelta(hours=1))
    placed = outflowhq.Row(key="placed", queue="events.fifo", group="g", payload="c")
    items = producer.transact_items([now, later, placed])
    shard = {item["Put"]["Item"]["pk"]["S"]: "shard" in item["Put"]["Item"] for item in items if "Put" in item}
    assert shard == {"now": not lean, "later": True, "placed": True}
