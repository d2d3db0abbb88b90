"""The README's examples, run as they are written: the producer stages into
the dispatcher's table, and the consumer (consume.Handler) and the
Powertools record handler apply the ordered rows it staged, each from a
Lambda SQS event built as the dispatcher would send the row. The setup an
adopter already has (the table with the dispatcher's published
configuration, the orders table) is made here, not in the README."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError

from conftest import create_table

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

pytestmark = pytest.mark.live

README = Path(__file__).resolve().parent.parent / "README.md"
FIFO_ARN = "arn:aws:sqs:us-east-1:000000000000:orders.fifo"


def blocks() -> list[tuple[int, str]]:
    """Each ```python block of the README: the line its code starts on,
    and the code."""
    text = README.read_text()
    out = []
    for m in re.finditer(r"^```python\n(.*?)^```$", text, re.S | re.M):
        out.append((text.count("\n", 0, m.start(1)) + 1, m.group(1)))
    return out


def block(marker: str) -> tuple[int, str]:
    found = [b for b in blocks() if marker in b[1]]
    assert len(found) == 1, f"one ```python block of {README} holds {marker!r}: found {len(found)}"
    return found[0]


def run(b: tuple[int, str], namespace: dict[str, Any]) -> None:
    """Run a block in namespace, compiled at its own lines of the README,
    so a traceback points at the README's line."""
    line, code = b
    exec(compile("\n" * (line - 1) + code, str(README), "exec"), namespace)


def test_every_python_block_is_run() -> None:
    # A block added to the README without a test here fails this test.
    markers = ["outflowhq.Producer.from_published", "consume.Inbox(", "SqsFifoPartialProcessor("]
    assert len(blocks()) == len(markers), "each ```python block of the README is run by test_the_readme_examples_run"
    for marker in markers:
        block(marker)


@pytest.fixture
def aws_env(moto_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the README's boto3.client("dynamodb") reads: moto's endpoint,
    a region and test credentials, as outflow moto exports them."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_url)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        monkeypatch.delenv(name, raising=False)


def _published(routes: dict[str, str], ordered: dict[str, str]) -> dict[str, Any]:
    """The dispatcher's published configuration item
    (docs/published-config.md)."""
    return {
        "pk": {"S": "config dispatcher"},
        "format": {"N": "1"},
        "routes": {"M": {k: {"S": v} for k, v in routes.items()}},
        "ordered": {"M": {k: {"S": v} for k, v in ordered.items()}},
        "shards": {"N": "4"},
        "max_message_bytes": {"N": "262144"},
        "revision": {"N": "1"},
        "published_at": {"N": "1796270000000"},
    }


@pytest.fixture
def tables(dynamodb: DynamoDBClient, aws_env: None) -> Iterator[None]:
    """The dispatcher's table "outbox" with the routes the README stages
    to published in it, and the orders table of the README's own writes;
    the README's consumer makes "ledger". All three are deleted after."""
    queue = "https://sqs.us-east-1.amazonaws.com/000000000000/"
    create_table(dynamodb, "outbox")
    dynamodb.put_item(
        TableName="outbox",
        Item=_published({"orders": queue + "orders", "orders.fifo": queue + "orders.fifo", "audit": queue + "audit"}, {"orders.fifo": "skip"}),
    )
    dynamodb.create_table(
        TableName="orders",
        BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
    )
    try:
        yield
    finally:
        for name in ("outbox", "orders", "ledger"):
            try:
                dynamodb.delete_table(TableName=name)
            except dynamodb.exceptions.ResourceNotFoundException:
                pass


def _record(dynamodb: DynamoDBClient, key: str) -> dict[str, Any]:
    """The Lambda SQS record of the staged row key as the dispatcher sends
    it to a FIFO queue (internal/delivery/sqs.go): the payload as the body,
    the key, attempt and place as message attributes, the group as
    MessageGroupId."""
    item = dynamodb.get_item(TableName="outbox", Key={"pk": {"S": key}}, ConsistentRead=True).get("Item")
    assert item, f"{key} is staged"
    assert "S" in item["payload"], f"{key}: a text payload"

    def attr(value: str, kind: str = "String") -> dict[str, str]:
        return {"stringValue": value, "dataType": kind}

    return {
        "messageId": "id-" + key,
        "receiptHandle": "rh-" + key,
        "body": item["payload"]["S"],
        "attributes": {"MessageGroupId": item["group"]["S"]},
        "messageAttributes": {
            "outflow.key": attr(key),
            "outflow.attempt": attr("1", "Number"),
            "outflow.seq": attr(item["seq"]["N"], "Number"),
        },
        "eventSource": "aws:sqs",
        "eventSourceARN": FIFO_ARN,
        "awsRegion": "us-east-1",
    }


def _event(*records: dict[str, Any]) -> dict[str, Any]:
    return {"Records": list(records)}


def _failed(response: Any) -> list[str]:
    return [f["itemIdentifier"] for f in response["batchItemFailures"]]


def _why(consumer: dict[str, Any], *records: dict[str, Any]) -> str:
    """Why the README's apply fails the records, for a failed assertion's
    message: each applied again, directly."""
    from outflowhq import consume

    out = []
    for r in records:
        try:
            consume.apply_message(consume.from_lambda(r), consumer["apply"], consumer["inbox"].close)
            out.append(f"{r['messageId']}: applied now")
        except Exception as e:
            out.append(f"{r['messageId']}: {e!r}")
    return "; ".join(out)


def test_the_readme_examples_run(dynamodb: DynamoDBClient, tables: None) -> None:
    # The producer: three rows staged, two of them in order in group order-43.
    produced: dict[str, Any] = {}
    run(block("outflowhq.Producer.from_published"), produced)
    assert produced["keys"] == ["order-43-created", "order-43-paid"]
    for key in ("order-42-created", "order-43-created", "order-43-paid"):
        assert "Item" in dynamodb.get_item(TableName="outbox", Key={"pk": {"S": key}}, ConsistentRead=True), f"{key} is staged"
    assert "Item" in dynamodb.get_item(TableName="orders", Key={"id": {"S": "43"}}, ConsistentRead=True), "the producer's own write committed"
    created, paid = _record(dynamodb, "order-43-created"), _record(dynamodb, "order-43-paid")
    assert [created["messageAttributes"]["outflow.seq"]["stringValue"], paid["messageAttributes"]["outflow.seq"]["stringValue"]] == ["1", "2"]

    # The consumer, then the Powertools record handler on its Inbox: one
    # consumer, two ways of running it.
    consumer: dict[str, Any] = {}
    run(block("consume.Inbox("), consumer)
    run(block("SqsFifoPartialProcessor("), consumer)
    handler, powertools = consumer["handler"].handle, consumer["lambda_handler"]

    # Place 2 before place 1 is not its turn: retried. A batch whose every
    # record failed makes Powertools raise (raise_on_entire_batch_failure),
    # which fails the invocation: the whole batch comes back.
    with pytest.raises(BatchProcessingError, match="All records failed"):
        powertools(_event(paid), None)
    assert _failed(handler(_event(created))) == [], "place 1 applied: " + _why(consumer, created)
    assert _failed(powertools(_event(paid), None)) == [], "place 2 applied in its turn: " + _why(consumer, paid)
    assert _failed(handler(_event(created, paid))) == [], "copies are done, not failures: " + _why(consumer, created, paid)
    assert _failed(powertools(_event(created, paid), None)) == [], "copies are done, not failures: " + _why(consumer, created, paid)

    effect = dynamodb.get_item(TableName="ledger", Key={"pk": {"S": "events order-43"}}, ConsistentRead=True).get("Item")
    assert effect == {"pk": {"S": "events order-43"}, "events": {"N": "2"}, "last_event": {"S": "order-43-paid"}}, "each row's effect once, in order"
    cursor = dynamodb.get_item(TableName="ledger", Key={"pk": {"S": "cursor billing order-43"}}, ConsistentRead=True).get("Item")
    assert cursor and cursor["seq"] == {"N": "2"}, "the group's cursor is at its last place"
