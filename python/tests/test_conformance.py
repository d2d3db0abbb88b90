"""The Python producer held to the shared conformance vectors: the Go
producer's tests (conformance_test.go) read the same files."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

import pytest
from botocore.exceptions import ClientError

import outflowhq
import vectors
from fakes import FakeDynamoDB
from outflowhq import _item, _target

ROWS = vectors.load("rows.json")
INVALID = vectors.load("invalid.json")
CLASSIFY = vectors.load("classify.json")
PUBLISHED = vectors.load("published.json")
CONTENT = vectors.load("content.json")
#: The Config a published configuration of two routes gives (table outbox).
PUBLISHED_CONFIG = outflowhq.decode_published(
    "outbox", next(v["item"] for v in PUBLISHED if v["name"] == "a published configuration fills an empty Config")
).apply()

#: Every validation kind the Go producer has: invalid.json must give each.
VALIDATION_KINDS = {
    "empty_queue", "invalid_key", "empty_payload", "too_large", "too_many_attributes", "attribute_name",
    "attribute_value", "group_required", "invalid_id", "group_not_fifo", "not_json", "event_field", "item_too_large", "no_route",
    "ordered_route", "duplicate_key", "too_many_items", "order_unknown", "invalid_config",
}  # fmt: skip


def test_the_vectors_are_all_there() -> None:
    # Counts the Go and TypeScript suites read too (the table in
    # conformance/README.md): a vector file cut short fails here.
    assert len(ROWS) >= 29
    assert len(INVALID) >= 142
    assert len(CLASSIFY) >= 22
    assert len(PUBLISHED) >= 24
    assert len(CONTENT) >= 8
    assert VALIDATION_KINDS <= {v["kind"] for v in INVALID if v["kind"] is not None}
    assert {k.value for k in outflowhq.Kind} >= VALIDATION_KINDS


def _ids(vs: list[dict[str, Any]]) -> list[str]:
    return [v["name"] for v in vs]


def _clock(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


@pytest.mark.parametrize("v", ROWS, ids=_ids(ROWS))
def test_rows_become_their_items(v: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    expected = [vectors.expected_shape(i) for i in v["items"]]
    stage_ids: Iterator[str] = iter([i["Put"]["Item"]["stage_id"]["S"] for i in expected if "Put" in i])
    xray = v.get("context_trace", {}).get("xray")
    if xray:
        monkeypatch.setenv("_X_AMZN_TRACE_ID", xray)
    else:
        monkeypatch.delenv("_X_AMZN_TRACE_ID", raising=False)
    producer = outflowhq.Producer(
        FakeDynamoDB(v.get("table", [])), vectors.config(v["config"]), clock=lambda: _clock(v["clock_ms"]), stage_id=lambda: next(stage_ids)
    )
    rows = vectors.rows(v)
    if v["call"] == "transact_item":
        assert len(rows) == 1
        items = [producer.transact_item(rows[0])]
    else:
        items = producer.transact_items(rows)
    got = [vectors.shape(i) for i in items]
    if v.get("generated_key"):
        for g, e in zip(got, expected, strict=True):
            item = g["Put"]["Item"]
            key = item["pk"]["S"]
            assert vectors.ULID.fullmatch(key), key
            assert _ulid_ms(key) == v["clock_ms"]
            item["pk"] = {"S": "*"}
            if "shard" not in e["Put"]["Item"]:
                assert "shard" not in item, "a lean row is staged outside the due index"
                continue
            assert item["shard"]["S"] == str(_fnv(key) % (v["config"].get("shards") or 4))
            item["shard"] = {"S": "*"}
    assert got == expected


def _ulid_ms(key: str) -> int:
    alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
    n = 0
    for ch in key[:10]:
        n = n * 32 + alphabet.index(ch)
    return n


def _fnv(key: str) -> int:
    h = 0x811C9DC5
    for b in key.encode():
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h


@pytest.mark.parametrize("v", INVALID, ids=_ids(INVALID))
def test_invalid_rows_give_their_kind(v: dict[str, Any]) -> None:
    call, kind = v["call"], v["kind"]
    rows = vectors.rows(v)

    def run() -> None:
        if call == "validate":
            assert len(rows) == 1
            rows[0].validate(v["config"].get("max_message_bytes", 0))
            return
        producer = outflowhq.Producer(FakeDynamoDB(v.get("table", [])), vectors.config(v["config"]), trace_parent=lambda: "")
        if call == "new_producer":
            return
        if call == "transact_item":
            assert len(rows) == 1
            producer.transact_item(rows[0])
        elif call == "transact_items":
            producer.transact_items(rows)
        else:
            raise AssertionError(f"unknown call {call}")

    if kind is None:
        run()
        return
    with pytest.raises(outflowhq.OutflowError) as raised:
        run()
    assert raised.value.kind == kind, str(raised.value)


@pytest.mark.parametrize("v", CLASSIFY, ids=_ids(CLASSIFY))
def test_classify_explains_a_cancellation(v: dict[str, Any]) -> None:
    client = FakeDynamoDB(v.get("table", []))
    producer = outflowhq.Producer(client, vectors.config(v["config"]), trace_parent=lambda: "")
    items = [vectors.to_boto(o) for o in v.get("own", [])]
    items += producer.transact_items(vectors.rows(v))
    reasons = [vectors.to_boto(r) for r in v["reasons"]]
    error = ClientError(
        {"Error": {"Code": "TransactionCanceledException", "Message": "Transaction cancelled"}, "CancellationReasons": reasons},
        "TransactWriteItems",
    )
    explained = producer.classify(error, items)
    assert isinstance(explained, outflowhq.TransactError)
    assert explained.__cause__ is error
    got = [
        {"index": i.index, "code": i.code, "reason": i.reason, "table": i.table, "row": i.row, "queue": i.queue, "group": i.group}
        for i in explained.items
    ]
    assert got == v["expect"]["items"]
    assert explained.retryable == v["expect"]["retryable"]
    for want in v["expect"]["items"]:
        if want["reason"] is not None:
            assert explained.has(want["reason"])


@pytest.mark.parametrize("v", CONTENT, ids=_ids(CONTENT))
def test_the_content_digest_is_gos(v: dict[str, Any]) -> None:
    assert _item.content_digest(vectors.payload(v["payload"]), v.get("attributes")) == v["digest"]


_STAGED = _item.Content("events.fifo", b'{"id":1}', {"type": "created", "v": "1"}, "g", 1796270000000)
_TOMBSTONE = replace(_STAGED, payload=b"", attributes={}, digest=_item.content_digest(_STAGED.payload, _STAGED.attributes), dropped=True)


@pytest.mark.parametrize(
    ("change", "same"),
    [
        ({}, True),
        ({"attributes": {"type": "created", "v": "1", "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}, True),
        ({"payload": b'{"id":2}'}, False),
        ({"attributes": {"type": "created", "v": "2"}}, False),
        ({"attributes": {"type": "created"}}, False),
        ({"attributes": {"type": "created", "v1": ""}}, False),
        ({"payload": b'{"id":1}typecreatedv1', "attributes": {}}, False),
        ({"queue": "other.fifo"}, False),
        ({"group": "h"}, False),
        ({"not_before_ms": 1796270001000}, False),
    ],
    ids=["same", "trace context", "payload", "attribute value", "attribute fewer", "moved across", "in the payload", "queue", "group", "delay"],
)
def test_same_content_compares_a_tombstone_by_its_digest(change: dict[str, Any], same: bool) -> None:
    """Go's TestSameContent_ComparesATombstoneByItsDigest: against the
    tombstone either way round, and against a done row that kept its
    payload. (Content's attributes leave the trace context out, as
    content_of and the producer give them; the digest leaves it out too.)"""
    retry = replace(_STAGED, **change)
    kept = _STAGED
    assert _item.same_content(_TOMBSTONE, retry) is same
    assert _item.same_content(retry, _TOMBSTONE) is same
    if "traceparent" not in retry.attributes:
        assert _item.same_content(kept, retry) is same


def test_content_of_reads_a_tombstone_and_falls_back_on_a_kept_payload() -> None:
    base = {"pk": {"S": "k"}, "queue": {"S": "orders"}, "status": {"S": "done"}, "content": {"S": "sha256:00"}}
    assert _item.content_of(base) == _item.Content("orders", b"", {}, "", 0, "sha256:00", True)
    kept = _item.content_of({**base, "payload": {"S": "hello"}})
    assert kept is not None and not kept.dropped and kept.payload == b"hello"
    with_attrs = _item.content_of({**base, "attributes": {"M": {}}})
    assert with_attrs is not None and not with_attrs.dropped
    plain = _item.content_of({k: v for k, v in base.items() if k != "content"})
    assert plain is not None and not plain.dropped


def test_classify_passes_other_errors_through() -> None:
    producer = outflowhq.Producer(FakeDynamoDB(), outflowhq.Config(table="outbox", ordered=[]))
    other = ClientError({"Error": {"Code": "ValidationException", "Message": "bad"}}, "TransactWriteItems")
    assert producer.classify(other, []) is other
    boom = RuntimeError("lost")
    assert producer.classify(boom, []) is boom


@pytest.mark.parametrize("v", PUBLISHED, ids=_ids(PUBLISHED))
def test_published_configuration(v: dict[str, Any]) -> None:
    client = FakeDynamoDB([v["item"]] if v["item"] is not None else [])

    def run() -> tuple[outflowhq.Published, outflowhq.Config]:
        pub = outflowhq.load_published(client, "outbox")
        return pub, pub.apply(vectors.config(v["apply"]))

    if v.get("kind") is not None:
        with pytest.raises(outflowhq.OutflowError) as raised:
            run()
        assert raised.value.kind == v["kind"], str(raised.value)
        return
    pub, cfg = run()
    want = v["expect"]
    assert dict(pub.routes) == want["routes"]
    assert dict(pub.ordered) == want["ordered"]
    assert (pub.shards, pub.max_message_bytes, pub.revision) == (want["shards"], want["max_message_bytes"], want["revision"])
    assert int(pub.published_at.timestamp() * 1000) == want["published_at_ms"]
    assert pub.published_by == want["published_by"]
    assert pub.lean is want.get("lean", False)
    c = want["config"]
    assert (cfg.table, cfg.shards, cfg.max_message_bytes) == (c["table"], c["shards"], c["max_message_bytes"])
    assert list(cfg.ordered or []) == c["ordered"]
    assert cfg.routes is not None and dict(_target.parse_routes(cfg.routes)) == _target.parse_routes(c["routes"])
    assert cfg.lean is c.get("lean", False)


def test_stage_ids_and_keys_are_fresh() -> None:
    producer = outflowhq.Producer(FakeDynamoDB(), outflowhq.Config(table="outbox", ordered=[]))
    items = [producer.transact_item(outflowhq.Row(queue="orders", payload="x")) for _ in range(3)]
    keys = {i["Put"]["Item"]["pk"]["S"] for i in items}
    stage_ids = {i["Put"]["Item"]["stage_id"]["S"] for i in items}
    assert len(keys) == len(stage_ids) == 3
    for k, s in itertools.product(keys, stage_ids):
        assert vectors.ULID.fullmatch(k) and vectors.STAGE_ID.fullmatch(s)


def test_a_row_validates_on_its_own() -> None:
    outflowhq.Row(queue="orders", payload=b"x").validate()
    with pytest.raises(outflowhq.InvalidRowError) as raised:
        outflowhq.Row(queue="orders.fifo", payload="x").validate()
    assert raised.value.kind is outflowhq.Kind.GROUP_REQUIRED


def test_a_group_on_a_route_that_is_not_fifo_is_refused_in_the_clis_words() -> None:
    # Whether a row takes a group is its route's name's to say, as outflow
    # enqueue decides; each way of staging refuses it before sending.
    row = outflowhq.Row(queue="orders", group="g1", payload="x")
    producer = outflowhq.Producer(FakeDynamoDB(), outflowhq.Config(table="outbox", ordered=[]))
    want = "group 'g1': route 'orders' is not FIFO (its name does not end in .fifo), and only a FIFO queue or topic has message groups; drop the group"
    calls: list[Callable[[], object]] = [
        row.validate,
        lambda: producer.transact_item(row),
        lambda: producer.transact_items([row]),
        lambda: producer.transact([row]),
        lambda: producer.put(row),
    ]
    for call in calls:
        with pytest.raises(outflowhq.OutflowError) as raised:
            call()
        assert raised.value.kind is outflowhq.Kind.GROUP_NOT_FIFO
        assert want in str(raised.value)


@pytest.mark.parametrize(
    ("config", "want"),
    [
        (
            outflowhq.Config(table="outbox", ordered=[], routes="orders=https://sqs.us-east-1.amazonaws.com/123456789012/orders"),
            "no such route: route 'order-events' is not one of the routes given (orders)",
        ),
        (
            PUBLISHED_CONFIG,
            "no such route: route 'order-events' is not one of the routes the dispatcher published in table outbox (orders, orders.fifo)",
        ),
        (
            replace(PUBLISHED_CONFIG, routes="orders=https://sqs.us-east-1.amazonaws.com/123456789012/orders", ordered=[]),
            "no such route: route 'order-events' is not one of the routes given (orders)",
        ),
    ],
    ids=["routes given", "routes published", "routes changed after apply"],
)
def test_an_unknown_route_is_refused_saying_where_the_routes_came_from(config: outflowhq.Config, want: str) -> None:
    producer = outflowhq.Producer(FakeDynamoDB(), config)
    with pytest.raises(outflowhq.InvalidRowError) as raised:
        producer.transact_item(outflowhq.Row(queue="order-events", payload="x"))
    assert raised.value.kind is outflowhq.Kind.NO_ROUTE
    assert str(raised.value) == want


def test_empty_routes_are_no_routes() -> None:
    none: list[str | dict[str, str]] = ["", " ", {}]
    for routes in none:
        producer = outflowhq.Producer(FakeDynamoDB(), outflowhq.Config(table="outbox", ordered=[], routes=routes))
        producer.transact_item(outflowhq.Row(queue="anything", payload="x"))


def test_transact_refuses_a_client_request_token() -> None:
    producer = outflowhq.Producer(FakeDynamoDB(), outflowhq.Config(table="outbox", ordered=[]))
    with pytest.raises(ValueError, match="ClientRequestToken"):
        producer.transact([outflowhq.Row(queue="orders", payload="x")], ClientRequestToken="t")


def test_the_trace_comes_from_lambdas_xray_header(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("_X_AMZN_TRACE_ID", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=0")
    assert outflowhq.current_trace_parent() == "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-00"
    monkeypatch.setenv("_X_AMZN_TRACE_ID", "Root=1-5759e988-bd862e3fe1be46a994272793")
    assert outflowhq.current_trace_parent() == ""
