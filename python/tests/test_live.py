"""The live conformance scenarios (conformance/producer/live.json) against
the project's patched moto server, as the Go suite runs them; and a chain
begun by the items the Go producer writes, continued from Python."""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest
from botocore.exceptions import ClientError

import outflowhq
import vectors

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

pytestmark = pytest.mark.live

LIVE = vectors.load("live.json")


def test_the_live_scenarios_are_all_there() -> None:
    assert len(LIVE) >= 8
    assert {s["op"] for v in LIVE for s in v["steps"]} >= {"put", "transact", "prepare", "send", "arm_conflict", "settle_done"}


def _sub(v: Any, table: str) -> Any:
    return json.loads(json.dumps(v).replace("${table}", table))


def _arm_conflict(moto_url: str, table: str, key: str) -> None:
    query = urllib.parse.urlencode({"table": table, "key": key})
    req = urllib.request.Request(f"{moto_url}/outflow-faults/transaction-conflict?{query}", method="POST")
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.status == 200


def _settle_done(client: DynamoDBClient, table: str, key: str, content: str) -> None:
    """The dispatcher's settle of key to done under a retention, written as
    Go's store writes it (internal/dynamo Store.Done): the row a tombstone
    that keeps content, the digest Go wrote for the vector, in place of its
    payload and attributes."""
    now = time.time()
    client.update_item(
        TableName=table,
        Key={"pk": {"S": key}},
        ConditionExpression="attribute_exists(#pk)",
        UpdateExpression="SET #status = :done, #done_at = :done_at, #expires_at = :expires_at, #content = :content "
        "REMOVE #shard, #due_at, #claim_token, #lease_until, #payload, #attributes",
        ExpressionAttributeNames={
            f"#{n}": n
            for n in ("pk", "status", "done_at", "expires_at", "content", "shard", "due_at", "claim_token", "lease_until", "payload", "attributes")
        },
        ExpressionAttributeValues={
            ":done": {"S": "done"},
            ":done_at": {"N": str(int(now * 1000))},
            ":expires_at": {"N": str(int(now) + 24 * 3600)},
            ":content": {"S": content},
        },
    )


def _check_tx(step: dict[str, Any], error: BaseException | None) -> None:
    if step["kind"] is None:
        assert error is None, str(error)
        return
    assert isinstance(error, outflowhq.OutflowError) and error.kind == step["kind"], repr(error)
    assert isinstance(error, outflowhq.TransactError)
    got = [{"index": i.index, "reason": i.reason} for i in error.items]
    assert got == step["items"], str(error)
    if "retryable" in step:
        assert error.retryable == step["retryable"]


def _check_table(client: DynamoDBClient, table: str, expect: list[dict[str, Any]], absent: list[str]) -> None:
    for want in expect:
        key = want["pk"]["S"]
        item = client.get_item(TableName=table, Key={"pk": {"S": key}}, ConsistentRead=True).get("Item")
        assert item, f"{key} is staged"
        got = vectors.from_boto(item)
        if "stage_id" in want:
            vectors.check_volatile(got, want)
        assert got == want, key
    for key in absent:
        assert "Item" not in client.get_item(TableName=table, Key={"pk": {"S": key}}, ConsistentRead=True), f"{key} is not staged"


@pytest.mark.parametrize("v", LIVE, ids=[v["name"] for v in LIVE])
def test_live_scenarios(v: dict[str, Any], dynamodb: DynamoDBClient, table: str, moto_url: str) -> None:
    cfg = vectors.config({**v["config"], "table": table})
    producer = outflowhq.Producer(dynamodb, cfg, trace_parent=lambda: "")
    prepared: dict[str, list[outflowhq.TransactWriteItem]] = {}
    for step in v["steps"]:
        rows = [vectors.row(r) for r in step.get("rows", [])]
        op = step["op"]
        if op == "put":
            kinds = step["kinds"]
            try:
                producer.put(*rows)
                errors: list[outflowhq.OutflowError | None] = [None] * len(rows)
            except outflowhq.PutError as e:
                errors = e.errors
            assert [e.kind if e is not None else None for e in errors] == kinds, [str(e) for e in errors]
        elif op == "transact":
            own = [vectors.to_boto(_sub(o, table)) for o in step.get("own", [])]
            error: BaseException | None = None
            try:
                producer.transact(rows, own)
            except outflowhq.OutflowError as e:
                error = e
            _check_tx(step, error)
        elif op == "prepare":
            prepared[step["name"]] = producer.transact_items(rows)
        elif op == "send":
            items = prepared[step["name"]]
            error = None
            try:
                dynamodb.transact_write_items(TransactItems=items)  # type: ignore[arg-type]
            except ClientError as e:
                error = producer.classify(e, items)
            _check_tx(step, error)
        elif op == "arm_conflict":
            _arm_conflict(moto_url, table, step["key"])
        elif op == "settle_done":
            _settle_done(dynamodb, table, step["key"], step["content"])
        else:
            raise AssertionError(f"unknown op {op}")
    _check_table(dynamodb, table, v["expect_table"], v.get("absent", []))


def _vector(vs: list[dict[str, Any]], name: str) -> dict[str, Any]:
    (v,) = [v for v in vs if v["name"] == name]
    return v


def test_a_chain_the_go_producer_began_continues_from_python(dynamodb: DynamoDBClient, table: str) -> None:
    """Interop: the first place of group order-42 is written with exactly
    the items the Go producer gives for it (rows.json, which
    conformance_test.go checks against Go), then Python stages the next two
    rows one by one. The chain is places 1..3, each prev naming its
    predecessor, every item as the live vector (which the Go suite runs
    too) says."""
    go = _vector(vectors.load("rows.json"), "ordered route, empty group: place 1, no prev, the group item created")
    put, update = go["items"][0]["Put"], go["items"][1]["Update"]
    # The vector's expressions are resolved; sent with placeholders, they
    # must resolve to the vector's again.
    update_sent = {
        "TableName": table,
        "Key": update["Key"],
        "ConditionExpression": "attribute_not_exists (#pk)",
        "UpdateExpression": "SET #tail = :tail, #seq = :seq",
        "ExpressionAttributeNames": {"#pk": "pk", "#tail": "tail", "#seq": "seq"},
        "ExpressionAttributeValues": {":tail": {"S": "o-1"}, ":seq": {"N": "1"}},
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }
    assert vectors.shape({"Update": update_sent})["Update"] == vectors.expected_shape(go["items"][1])["Update"] | {"TableName": table}
    put_sent = {**put, "TableName": table}
    dynamodb.transact_write_items(TransactItems=vectors.to_boto([{"Put": put_sent}, {"Update": update_sent}]))

    producer = outflowhq.Producer(dynamodb, outflowhq.Config(table=table, ordered=["orders.fifo"]), trace_parent=lambda: "")
    row2 = outflowhq.Row(key="o-2", queue="orders.fifo", group="order-42", payload="lines added", attributes={"type": "order.lines"})
    assert producer.put(row2) == ["o-2"]
    assert producer.put(outflowhq.Row(key="o-3", queue="orders.fifo", group="order-42", payload="paid")) == ["o-3"]

    expect = _vector(LIVE, "three rows of one ordered group, staged one by one")["expect_table"]
    first = vectors.from_boto(dynamodb.get_item(TableName=table, Key={"pk": {"S": "o-1"}}, ConsistentRead=True)["Item"])
    assert first == put["Item"], "Go's place 1, as Go writes it"
    vectors.check_volatile(first, expect[0])
    assert first == expect[0], "and as the live vector says"
    _check_table(dynamodb, table, expect[1:], [])


def test_put_refuses_invalid_rows_before_sending(dynamodb: DynamoDBClient, table: str) -> None:
    producer = outflowhq.Producer(dynamodb, outflowhq.Config(table=table, ordered=[]))
    with pytest.raises(outflowhq.PutError) as raised:
        producer.put(outflowhq.Row(queue="orders", payload=""), outflowhq.Row(key="ok-1", queue="orders", payload="x"))
    assert raised.value.kind is outflowhq.Kind.EMPTY_PAYLOAD
    assert [e.kind if e else None for e in raised.value.errors] == [outflowhq.Kind.EMPTY_PAYLOAD, None]
    assert raised.value.keys[1] == "ok-1"


def test_from_published_reads_the_dispatchers_configuration(dynamodb: DynamoDBClient, table: str) -> None:
    with pytest.raises(outflowhq.ConfigError) as raised:
        outflowhq.Producer.from_published(dynamodb, table)
    assert raised.value.kind is outflowhq.Kind.NOT_PUBLISHED
    item = _vector(vectors.load("published.json"), "a published configuration fills an empty Config")["item"]
    dynamodb.put_item(TableName=table, Item=vectors.to_boto(item))
    producer = outflowhq.Producer.from_published(dynamodb, table, trace_parent=lambda: "")
    keys = producer.put(outflowhq.Row(key="f-1", queue="orders.fifo", group="g", payload="x"))
    assert keys == ["f-1"]
    got = dynamodb.get_item(TableName=table, Key={"pk": {"S": "f-1"}}, ConsistentRead=True)["Item"]
    assert got["seq"] == {"N": "1"}, "a published ordered route's row takes its place"
    with pytest.raises(outflowhq.PutError) as refused:
        producer.put(outflowhq.Row(key="f-2", queue="audit", payload="x"))
    assert refused.value.kind is outflowhq.Kind.NO_ROUTE
    # The table and the routes published there, as outflow enqueue says it.
    assert str(refused.value) == f"row 0: no such route: route 'audit' is not one of the routes the dispatcher published in table {table} (orders, orders.fifo)"


@pytest.mark.parametrize(
    "how",
    [
        "from_published",
        "load_published",
        "a FIFO row's published order",
    ],
)
def test_a_table_that_does_not_exist_is_named(how: str, dynamodb: DynamoDBClient, moto_url: str) -> None:
    # A wrong table (or region, or endpoint) reads as that, naming the
    # table and where it was looked for, not as botocore's bare "Requested
    # resource not found"; the error is still botocore's, for except
    # clauses written for it.
    missing = "outflow-nosuch-table"
    want = f'table "{missing}": not found in region us-east-1 at endpoint {moto_url} (ResourceNotFoundException)'
    if how == "a FIFO row's published order":
        producer = outflowhq.Producer(dynamodb, outflowhq.Config(table=missing))
        with pytest.raises(outflowhq.PutError) as refused:
            producer.put(outflowhq.Row(queue="orders.fifo", group="g", payload="x"))
        assert refused.value.kind is outflowhq.Kind.ORDER_UNKNOWN
        assert want in str(refused.value)
        return
    with pytest.raises(dynamodb.exceptions.ResourceNotFoundException) as raised:
        if how == "from_published":
            outflowhq.Producer.from_published(dynamodb, missing)
        else:
            outflowhq.load_published(dynamodb, missing)
    assert str(raised.value) == want
    assert isinstance(raised.value, ClientError)


class _Racing:
    """A client on which another producer stages into an ordered group just
    before each transaction is sent: the race transact_items warns of."""

    def __init__(self, client: DynamoDBClient, race: Callable[[], object]) -> None:
        self._client, self._race = client, race

    def get_item(self, **kwargs: Any) -> Any:
        return self._client.get_item(**kwargs)

    def put_item(self, **kwargs: Any) -> Any:
        return self._client.put_item(**kwargs)

    def transact_write_items(self, **kwargs: Any) -> Any:
        self._race()
        return self._client.transact_write_items(**kwargs)


@pytest.mark.parametrize("how", ["transact", "transact_items and classify"])
def test_a_group_race_says_which_call_builds_the_items_again(how: str, dynamodb: DynamoDBClient, table: str) -> None:
    # transact builds the rows' items itself, so its caller calls it again;
    # a caller who sent transact_items' items in a transaction of its own
    # builds them again with transact_items.
    config = outflowhq.Config(table=table, ordered=["orders.fifo"])
    other = outflowhq.Producer(dynamodb, config)
    racing = _Racing(dynamodb, lambda: other.put(outflowhq.Row(queue="orders.fifo", group="g", payload="first")))
    producer = outflowhq.Producer(racing, config)
    row = outflowhq.Row(key="race-1", queue="orders.fifo", group="g", payload="x")
    if how == "transact":
        with pytest.raises(outflowhq.TransactError) as raised:
            producer.transact([row])
        error: BaseException = raised.value
        want = "another producer staged into the group first (call transact again: it builds the rows' items anew)"
    else:
        items = producer.transact_items([row])
        with pytest.raises(ClientError) as sent:
            racing.transact_write_items(TransactItems=items)
        error = producer.classify(sent.value, items)
        want = "another producer staged into the group first (build the row's items again with transact_items)"
    assert isinstance(error, outflowhq.TransactError)
    assert error.has(outflowhq.Kind.GROUP_RACE) and error.retryable
    assert f"(tail of group 'g' of orders.fifo): {want}" in str(error)
