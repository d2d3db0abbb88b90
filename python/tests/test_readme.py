"""The README's examples, run as they are written: the producer stages into
the dispatcher's table; the consumer's receive loop (inbox.poller) applies
the ordered rows it staged from a FIFO queue they are sent to as the
dispatcher sends them, until SIGTERM; then the Lambda handler
(inbox.handler) and the Powertools record handler apply the same rows
again from an empty ledger, each from a Lambda SQS event built as the
dispatcher would send the row. The setup an adopter already has (the
table with the dispatcher's published configuration, the orders table,
the queue) is made here, not in the README."""

from __future__ import annotations

import os
import re
import signal
import threading
import time
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
    markers = ["outflowhq.Producer.from_published", "inbox.poller(", "inbox.handler(", "SqsFifoPartialProcessor("]
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
def orders_queue(sqs: Any, aws_env: None) -> Iterator[str]:
    """The FIFO queue "orders.fifo" the README's receive loop consumes,
    deleted after the test."""
    url: str = sqs.create_queue(QueueName="orders.fifo", Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "false"})["QueueUrl"]
    try:
        yield url
    finally:
        sqs.delete_queue(QueueUrl=url)


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


def _send(sqs: Any, url: str, record: dict[str, Any]) -> None:
    """Send the row a Lambda record stands for to the queue, as the
    dispatcher sends it: the same body, attributes and group, the key as
    deduplication id."""
    attrs = {k: {"DataType": v["dataType"], "StringValue": v["stringValue"]} for k, v in record["messageAttributes"].items()}
    sqs.send_message(QueueUrl=url, MessageBody=record["body"], MessageAttributes=attrs,
                     MessageGroupId=record["attributes"]["MessageGroupId"],
                     MessageDeduplicationId=attrs["outflow.key"]["StringValue"])


def _run_until_applied(b: tuple[int, str], namespace: dict[str, Any], applied: int) -> None:
    """Run the receive loop's block on this (the main) thread, which blocks
    in poller.run(handle_signals=True), and send this process SIGTERM once
    its counts say applied messages were applied, as a container's stop
    would; past the deadline, stop the poller instead, for the test to
    fail on what it finds."""
    finished = threading.Event()
    before = signal.getsignal(signal.SIGTERM)

    def terminate() -> None:
        deadline = time.monotonic() + 120
        while not finished.is_set():
            counts = namespace.get("counts")
            poller = namespace.get("poller")
            if poller is not None and counts is not None and counts.applied >= applied and signal.getsignal(signal.SIGTERM) is not before:
                # The handler run() installed is in place: the default
                # would end the test run.
                os.kill(os.getpid(), signal.SIGTERM)
                return
            if poller is not None and time.monotonic() > deadline:
                poller.stop()
                return
            time.sleep(0.05)

    helper = threading.Thread(target=terminate, daemon=True)
    helper.start()
    try:
        run(b, namespace)
    finally:
        finished.set()
        helper.join(10)
        signal.signal(signal.SIGTERM, before)


def _event(*records: dict[str, Any]) -> dict[str, Any]:
    return {"Records": list(records)}


def _failed(response: Any) -> list[str]:
    return [f["itemIdentifier"] for f in response["batchItemFailures"]]


def _why(consumer: dict[str, Any], *records: dict[str, Any]) -> str:
    """Why the README's apply fails the records, for a failed assertion's
    message: each applied again, directly."""
    from outflowhq import consume

    out = []
    inbox, effect = consumer["inbox"], consumer["effect"]
    for r in records:
        try:
            consume.apply_message(consume.from_lambda(r), lambda m: inbox.apply(m, effect(m)), inbox.close)
            out.append(f"{r['messageId']}: applied now")
        except Exception as e:
            out.append(f"{r['messageId']}: {e!r}")
    return "; ".join(out)


def test_the_readme_examples_run(dynamodb: DynamoDBClient, sqs: Any, tables: None, orders_queue: str) -> None:
    # The producer: three rows staged, two of them in order in group order-43.
    produced: dict[str, Any] = {}
    run(block("outflowhq.Producer.from_published"), produced)
    assert produced["keys"] == ["order-43-created", "order-43-paid"]
    for key in ("order-42-created", "order-43-created", "order-43-paid"):
        assert "Item" in dynamodb.get_item(TableName="outbox", Key={"pk": {"S": key}}, ConsistentRead=True), f"{key} is staged"
    assert "Item" in dynamodb.get_item(TableName="orders", Key={"id": {"S": "43"}}, ConsistentRead=True), "the producer's own write committed"
    created, paid = _record(dynamodb, "order-43-created"), _record(dynamodb, "order-43-paid")
    assert [created["messageAttributes"]["outflow.seq"]["stringValue"], paid["messageAttributes"]["outflow.seq"]["stringValue"]] == ["1", "2"]

    # The consumer's receive loop, on the queue the rows were sent to,
    # until SIGTERM once both are applied.
    assert threading.current_thread() is threading.main_thread(), "run(handle_signals=True) needs the main thread"
    _send(sqs, orders_queue, created)
    _send(sqs, orders_queue, paid)
    consumer: dict[str, Any] = {}
    _run_until_applied(block("inbox.poller("), consumer, applied=2)
    assert consumer["poller"].stopping, "SIGTERM stopped it"
    counts = consumer["counts"]
    assert (counts.applied, counts.total) == (2, 2), counts
    effect = dynamodb.get_item(TableName="ledger", Key={"pk": {"S": "events order-43"}}, ConsistentRead=True).get("Item")
    assert effect == {"pk": {"S": "events order-43"}, "events": {"N": "2"}, "last_event": {"S": "order-43-paid"}}, "each row's effect once, in order"
    attrs = sqs.get_queue_attributes(QueueUrl=orders_queue, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"])["Attributes"]
    assert (attrs["ApproximateNumberOfMessages"], attrs["ApproximateNumberOfMessagesNotVisible"]) == ("0", "0"), "both deleted"

    # The same consumer as a Lambda function, then the Powertools record
    # handler on its Inbox, from an empty ledger: one consumer, three ways
    # of running it.
    for item in dynamodb.scan(TableName="ledger", ConsistentRead=True)["Items"]:
        dynamodb.delete_item(TableName="ledger", Key={"pk": item["pk"]})
    run(block("inbox.handler("), consumer)
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
