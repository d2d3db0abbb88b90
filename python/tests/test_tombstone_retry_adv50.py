"""Review of issue 50 (R50-1): a producer's retry of a key the 1.0.0
dispatcher delivered.

Since 6c60bc6 the settle to done (dynamo.Store.Done, under a done
retention) removes the row's payload and attributes and keeps their
digest in ``content`` (dynamo.ContentDigest). The CHANGELOG's 1.0.0 entry
says "a producer's retry of a delivered key is still recognised". Go's
producer compares by the digest (dynamo.SameContent); Python's
``_item.content_of`` reads the tombstone as an empty payload with no
attributes, so the very same row, retried, is a ``key_conflict``: the
caller is told its key was taken by other content, and a caller that
treats that as a bug (as the README says to) fails a request that did
commit.

The tombstone is written here exactly as Store.Done writes it (its
update expression), with the digest computed by the form
docs/compatibility.md documents.
"""

from __future__ import annotations

import hashlib
import struct
from typing import TYPE_CHECKING

import pytest

import outflowhq

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


def _digest(payload: bytes, attributes: dict[str, str]) -> str:
    h = hashlib.sha256()

    def field(b: bytes) -> None:
        h.update(struct.pack(">Q", len(b)))
        h.update(b)

    field(payload)
    for name in sorted(k for k in attributes if k != "traceparent"):
        field(name.encode())
        field(attributes[name].encode())
    return "sha256:" + h.hexdigest()


def _settle_done(client: DynamoDBClient, table: str, key: str, payload: bytes, attributes: dict[str, str]) -> None:
    """What dynamo.Store.Done does to a claimed row under a done retention."""
    client.update_item(
        TableName=table,
        Key={"pk": {"S": key}},
        UpdateExpression="SET #s = :done, #done = :now, #exp = :exp, #c = :c REMOVE #shard, #due, #tok, #lease, #p, #a",
        ExpressionAttributeNames={
            "#s": "status", "#done": "done_at", "#exp": "expires_at", "#c": "content", "#shard": "shard",
            "#due": "due_at", "#tok": "token", "#lease": "lease_until", "#p": "payload", "#a": "attributes",
        },
        ExpressionAttributeValues={
            ":done": {"S": "done"}, ":now": {"N": "1796270000500"}, ":exp": {"N": "1796356400"},
            ":c": {"S": _digest(payload, attributes)},
        },
    )  # fmt: skip


ROW = outflowhq.Row(key="order-1", queue="orders", payload=b'{"n":1}', attributes={"tenant": "t1"})


def _producer(dynamodb: DynamoDBClient, table: str) -> outflowhq.Producer:
    return outflowhq.Producer(dynamodb, outflowhq.Config(table=table, ordered=[]), trace_parent=lambda: "")


def test_R50_1_put_retry_of_a_delivered_key_is_recognised(dynamodb: DynamoDBClient, table: str) -> None:
    producer = _producer(dynamodb, table)
    producer.put(ROW)
    _settle_done(dynamodb, table, ROW.key, ROW.payload_bytes, dict(ROW.attributes or {}))
    # The same row, retried after the dispatcher delivered it: staged already.
    try:
        producer.put(ROW)
    except outflowhq.PutError as e:
        pytest.fail(f"the retry of a delivered key is refused: {[str(x) for x in e.errors]}")
    # Other content under the key is still a conflict.
    with pytest.raises(outflowhq.PutError) as raised:
        producer.put(outflowhq.Row(key="order-1", queue="orders", payload=b'{"n":2}', attributes={"tenant": "t1"}))
    assert [x.kind if x else None for x in raised.value.errors] == ["key_conflict"]


def test_R50_1_transact_retry_of_a_delivered_key_is_already_staged(dynamodb: DynamoDBClient, table: str) -> None:
    producer = _producer(dynamodb, table)
    producer.put(ROW)
    _settle_done(dynamodb, table, ROW.key, ROW.payload_bytes, dict(ROW.attributes or {}))
    with pytest.raises(outflowhq.TransactError) as raised:
        producer.transact([ROW])
    assert [i.reason for i in raised.value.items] == ["already_staged"], str(raised.value)
