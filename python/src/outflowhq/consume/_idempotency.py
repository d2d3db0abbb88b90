"""Idempotent side effects outside DynamoDB (Go's consume.Idempotency): a
record per message, in progress with a hold while the effect runs,
completed after, in the same table layout as Go's."""

from __future__ import annotations

import base64
import secrets
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any, TypeVar

from botocore.exceptions import ClientError

from ._inbox import ATTR_EXPIRES_AT, ATTR_PK, valid_consumer
from ._message import ConsumeError, DuplicateError, HoldLostError, InProgressError, Message

T = TypeVar("T")

_STATUS, _TOKEN, _HELD_UNTIL, _CONSUMER, _AT = "status", "token", "held_until", "consumer", "at"
IN_PROGRESS, COMPLETED = "in_progress", "completed"


def _token() -> str:
    """26 base32 characters, as Go's crypto/rand.Text gives."""
    return base64.b32encode(secrets.token_bytes(20)).decode("ascii")[:26]


def _seconds(d: float | timedelta) -> float:
    return d.total_seconds() if isinstance(d, timedelta) else float(d)


class Idempotency:
    """Runs a side effect once per message as far as the effect allows: a
    copy is skipped (DuplicateError) once the effect completed, and refused
    (InProgressError, retry later) while another copy runs it."""

    def __init__(
        self,
        client: Any,
        table: str,
        consumer: str,
        *,
        hold: float | timedelta,
        ttl: float | timedelta = 0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if client is None:
            raise ValueError("idempotency: no DynamoDB client")
        if table == "":
            raise ValueError("idempotency: no table")
        if not valid_consumer(consumer):
            raise ValueError(f"idempotency: consumer name {consumer!r} must be non-empty, without spaces")
        if _seconds(hold) <= 0:
            raise ValueError("idempotency: hold must be positive")
        if _seconds(ttl) < 0:
            raise ValueError("idempotency: TTL must not be negative")
        self.client, self.table, self.consumer = client, table, consumer
        self.hold, self.ttl = _seconds(hold), _seconds(ttl)
        self._clock = clock

    def do(self, m: Message, effect: Callable[[], T]) -> T:
        """Run effect for the message unless this consumer completed it
        (DuplicateError) or another copy is running it (InProgressError).
        An effect that raises releases its record, so a retry runs it
        again; its exception propagates as it is."""
        if m.key == "":
            raise ConsumeError("idempotency: a message without a key")
        key = {ATTR_PK: {"S": f"idempotency {self.consumer} {m.key}"}}
        token = _token()
        try:
            self._begin(key, token)
        except ConsumeError as e:
            raise type(e)(f"message {m.key}: {e}") from None
        try:
            result = effect()
        except BaseException:
            self._release(key, token)
            raise
        self._complete(m.key, key, token)
        return result

    def _begin(self, key: dict[str, Any], token: str) -> None:
        now = self._clock()
        until_ms = int(now * 1000) + int(self.hold * 1000)
        item = {
            **key,
            _STATUS: {"S": IN_PROGRESS},
            _TOKEN: {"S": token},
            _HELD_UNTIL: {"N": str(until_ms)},
            # An abandoned hold is deleted in time too.
            ATTR_EXPIRES_AT: {"N": str(int(until_ms / 1000 + self.ttl) + 1)},
            _CONSUMER: {"S": self.consumer},
        }
        try:
            self.client.put_item(
                TableName=self.table,
                Item=item,
                ConditionExpression="attribute_not_exists(#pk) OR (#status = :in_progress AND #held_until < :now)",
                ExpressionAttributeNames={"#pk": ATTR_PK, "#status": _STATUS, "#held_until": _HELD_UNTIL},
                ExpressionAttributeValues={":in_progress": {"S": IN_PROGRESS}, ":now": {"N": str(int(now * 1000))}},
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
            return
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
            current: Any = e.response.get("Item")
        if not current:
            current = self.client.get_item(TableName=self.table, Key=key, ConsistentRead=True).get("Item") or {}
        if current.get(_STATUS, {}).get("S") == COMPLETED:
            raise DuplicateError("already applied")
        if current.get(_TOKEN, {}).get("S") == token:
            return  # our own put, its answer lost and retried
        raise InProgressError("another copy is in progress")

    def _release(self, key: dict[str, Any], token: str) -> None:
        try:
            self.client.delete_item(
                TableName=self.table,
                Key=key,
                ConditionExpression="#token = :token",
                ExpressionAttributeNames={"#token": _TOKEN},
                ExpressionAttributeValues={":token": {"S": token}},
            )
        except Exception:
            pass  # the hold expires

    def _complete(self, msg_key: str, key: dict[str, Any], token: str) -> None:
        now = self._clock()
        names = {"#status": _STATUS, "#at": _AT, "#held_until": _HELD_UNTIL, "#token": _TOKEN, "#expires_at": ATTR_EXPIRES_AT}
        values: dict[str, Any] = {":completed": {"S": COMPLETED}, ":at": {"N": str(int(now * 1000))}, ":token": {"S": token}}
        if self.ttl > 0:
            values[":expires_at"] = {"N": str(int(now + self.ttl))}
            update = "SET #status = :completed, #at = :at, #expires_at = :expires_at REMOVE #held_until"
        else:
            update = "SET #status = :completed, #at = :at REMOVE #held_until, #expires_at"
        try:
            self.client.update_item(
                TableName=self.table,
                Key=key,
                UpdateExpression=update,
                ConditionExpression="#token = :token",
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                raise HoldLostError(f"message {msg_key}: the effect outlived its hold: another copy may have run it too") from None
            raise ConsumeError(f"message {msg_key}: the effect ran; mark it completed: {e}") from e
