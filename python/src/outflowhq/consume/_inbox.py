"""The inbox: the items a consumer adds to its own DynamoDB transaction so
that a duplicate is refused and an ordered group is applied in order. The
table layout and item attributes are Go's (consume/inbox.go, table.go), so
a Go and a Python consumer can share a table."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any

from botocore.exceptions import ClientError

from ._handler import ApplyFunc, Handler, record_handler
from ._message import (
    CLOSED_RESTAGED,
    ConsumeError,
    DuplicateError,
    GapPolicy,
    JoinPolicy,
    LateError,
    LatePolicy,
    Message,
    NoGroupError,
    OrderError,
)
from ._poller import Poller

ATTR_PK = "pk"
ATTR_EXPIRES_AT = "expires_at"
_CONSUMER, _KEY, _GROUP, _SEQ, _AT = "consumer", "key", "group", "seq", "at"
_SKIPPED, _GAP_FROM, _GAP_TO, _LATE_AFTER = "skipped", "gap_from", "gap_to", "late_after"
_APPLIED, _JOINED, _CLOSED = "applied", "joined", "closed"
#: A group cursor a redriven row started: joined again at its next gap
#: until a message sent in its turn moves it (Go's attrJoining).
_JOINING = "joining"

Item = dict[str, Any]
TransactItem = dict[str, Any]
#: A consumer's effect: its own transaction items for a message (may be
#: none), which the Inbox commits with its record of the message.
Effect = Callable[[Message], Sequence[Mapping[str, Any]]]


def valid_consumer(name: str) -> bool:
    """A consumer's name is part of item keys, whose parts are separated by
    spaces."""
    return name != "" and not any(c in name for c in " \t\r\n")


def _seconds(d: float | timedelta) -> float:
    return d.total_seconds() if isinstance(d, timedelta) else float(d)


def _key(pk: str) -> Item:
    return {ATTR_PK: {"S": pk}}


def _cursor_seq(item: Mapping[str, Any] | None) -> tuple[int, bool]:
    """A cursor item's place, and whether there is an item."""
    if not item:
        return 0, False
    v = item.get(_SEQ)
    try:
        if not isinstance(v, Mapping) or "N" not in v:
            raise ValueError
        return int(v["N"]), True
    except ValueError:
        raise ConsumeError("inbox: a group cursor without a whole-number seq") from None


def _bool(item: Mapping[str, Any], name: str) -> bool | None:
    v = item.get(name)
    if isinstance(v, Mapping) and isinstance(v.get("BOOL"), bool):
        return bool(v["BOOL"])
    return None


def _s(item: Mapping[str, Any], name: str) -> str | None:
    v = item.get(name)
    if isinstance(v, Mapping) and isinstance(v.get("S"), str):
        return str(v["S"])
    return None


def _canceled(error: BaseException | None) -> list[Mapping[str, Any]] | None:
    """The cancellation reasons of a TransactionCanceledException."""
    if not isinstance(error, ClientError):
        return None
    if error.response.get("Error", {}).get("Code") != "TransactionCanceledException":
        return None
    reasons: Any = error.response.get("CancellationReasons") or []
    return list(reasons)


class Inbox:
    """Records, in the consumer's own DynamoDB transaction, which messages a
    consumer applied and how far each ordered group has come (Go's
    consume.Inbox). ``client`` is a boto3 DynamoDB client; it may be None
    for a consumer that only uses transact_items and runs its transactions
    itself."""

    def __init__(
        self,
        client: Any,
        table: str,
        consumer: str,
        *,
        ttl: float | timedelta = 0,
        gaps: GapPolicy = GapPolicy.WAIT,
        late: LatePolicy = LatePolicy.RECORD,
        join: JoinPolicy = JoinPolicy.FROM_START,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if table == "":
            raise ValueError("inbox: no table")
        if not valid_consumer(consumer):
            raise ValueError(f"inbox: consumer name {consumer!r} must be non-empty, without spaces")
        if _seconds(ttl) < 0:
            raise ValueError("inbox: TTL must not be negative")
        self.client, self.table, self.consumer = client, table, consumer
        self.ttl, self.gaps, self.late, self.join = _seconds(ttl), gaps, late, join
        self._clock = clock

    # Keys.

    def inbox_key(self, m: Message) -> str:
        if m.closed == CLOSED_RESTAGED:
            return f"inbox {self.consumer} {m.key} restaged {m.group} {m.seq}"
        if m.closed:
            return f"inbox {self.consumer} {m.key} closed"
        return f"inbox {self.consumer} {m.key}"

    def cursor_key(self, m: Message) -> str:
        return f"cursor {self.consumer} {m.group}"

    # The items.

    def transact_items(self, m: Message) -> list[TransactItem]:
        """The put of the message's inbox item and, for an ordered group,
        the update of its cursor: add them to the transaction that makes
        the effect, and give its error to classify."""
        if m.closed:
            raise ConsumeError(f"inbox: message {m.key} closes place {m.seq} of its group and has no effect: give it to close")
        return self._items(m, None, None, False)

    def transact_items_past(self, m: Message, gap: OrderError) -> list[TransactItem]:
        """transact_items for a message refused for a gap, to apply it anyway."""
        if gap is None or not gap.gap or gap.place != m.seq or gap.key != m.key:
            raise ConsumeError("inbox: transact_items_past needs the message's own gap")
        return self._items(m, gap, None, False)

    def transact_items_late(self, m: Message, passed: OrderError) -> list[TransactItem]:
        """transact_items for a message its group went past, to apply it late."""
        if passed is None or passed.gap or passed.place != m.seq or passed.key != m.key:
            raise ConsumeError("inbox: transact_items_late needs the message's own refusal as passed")
        return self._items(m, None, passed, False)

    def transact_items_record_late(self, m: Message, passed: OrderError) -> list[TransactItem]:
        """transact_items_late for a message to record and not apply."""
        if passed is None or passed.gap or passed.place != m.seq or passed.key != m.key:
            raise ConsumeError("inbox: transact_items_record_late needs the message's own refusal as passed")
        return self._items(m, None, passed, True)

    def _items(self, m: Message, gap: OrderError | None, passed: OrderError | None, record: bool) -> list[TransactItem]:
        if m.key == "":
            raise ConsumeError("inbox: a message without a key")
        if m.ordered and m.group == "":
            raise NoGroupError(f"message {m.key}, place {m.seq}: an ordered message without its group")
        now = self._clock()
        now_ms = int(now * 1000)
        item: Item = {
            ATTR_PK: {"S": self.inbox_key(m)},
            _CONSUMER: {"S": self.consumer},
            _KEY: {"S": m.key},
            _AT: {"N": str(now_ms)},
        }
        if self.ttl > 0:
            item[ATTR_EXPIRES_AT] = {"N": str(int(now + self.ttl))}
        if m.ordered:
            item[_GROUP] = {"S": m.group}
            item[_SEQ] = {"N": str(m.seq)}
        if gap is not None:
            item[_GAP_FROM] = {"N": str(gap.cursor + 1)}
            item[_GAP_TO] = {"N": str(gap.place - 1)}
        if passed is not None:
            item[_LATE_AFTER] = {"N": str(passed.cursor)}
        if m.closed:
            item[_CLOSED] = {"S": m.closed}
        cond = "attribute_not_exists(#pk)"
        names = {"#pk": ATTR_PK}
        values: Item = {}
        if m.closed:
            pass  # a closing message's item is its own
        elif record:
            item[_APPLIED] = {"BOOL": False}
        else:
            # A late record stands for no effect: a message applied replaces it.
            cond += " OR #applied = :false"
            names["#applied"] = _APPLIED
            values[":false"] = {"BOOL": False}
        put: dict[str, Any] = {
            "TableName": self.table,
            "Item": item,
            "ConditionExpression": cond,
            "ExpressionAttributeNames": names,
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        if values:
            put["ExpressionAttributeValues"] = values
        items: list[TransactItem] = [{"Put": put}]
        if not m.ordered or passed is not None:
            return items
        after = m.seq - 1
        sets = ["#seq = :seq", "#key = :key", "#consumer = :consumer", "#group = :group", "#at = :at"]
        unames = {"#seq": _SEQ, "#key": _KEY, "#consumer": _CONSUMER, "#group": _GROUP, "#at": _AT}
        uvalues: Item = {
            ":seq": {"N": str(m.seq)},
            ":key": {"S": m.key},
            ":consumer": {"S": self.consumer},
            ":group": {"S": m.group},
            ":at": {"N": str(now_ms)},
        }
        add = ""
        joining = gap is not None and (gap.cursor == 0 or gap.joining)
        if gap is not None:
            after = gap.cursor
            add = " ADD #skipped :skipped"
            unames["#skipped"] = _SKIPPED
            uvalues[":skipped"] = {"N": str(gap.place - gap.cursor - 1)}
            if joining:
                sets.append("#joined = :seq")
                unames["#joined"] = _JOINED
        if not m.redriven:
            # A message sent in its turn: where the group started holds.
            add += " REMOVE #joining"
            unames["#joining"] = _JOINING
        elif self.join == JoinPolicy.WHERE_SEEN and (after == 0 or joining):
            # A redriven row may be late: the group starts here on trial.
            sets.append("#joining = :true")
            unames["#joining"] = _JOINING
            uvalues[":true"] = {"BOOL": True}
        if after == 0:
            ucond = "attribute_not_exists(#pk)"
            unames["#pk"] = ATTR_PK
        else:
            ucond = "#seq = :after"
            uvalues[":after"] = {"N": str(after)}
        items.append(
            {
                "Update": {
                    "TableName": self.table,
                    "Key": _key(self.cursor_key(m)),
                    "UpdateExpression": "SET " + ", ".join(sets) + add,
                    "ConditionExpression": ucond,
                    "ExpressionAttributeNames": unames,
                    "ExpressionAttributeValues": uvalues,
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            }
        )
        return items

    # Outcomes.

    def classify(self, m: Message, tx: Sequence[Mapping[str, Any]], error: BaseException | None) -> BaseException | None:
        """The outcome of the transaction tx, which holds the message's
        transact_items: None if it committed (error is None); a
        DuplicateError if the inbox item refused it; an OrderError if the
        group's cursor did; else error itself. Raise what it returns."""
        reasons = _canceled(error)
        if reasons is None:
            return error

        def refused(pk: str) -> Mapping[str, Any] | None:
            for i, it in enumerate(tx):
                if i >= len(reasons) or reasons[i].get("Code") != "ConditionalCheckFailed":
                    continue
                key: Mapping[str, Any] = {}
                if "Put" in it and it["Put"].get("TableName") == self.table:
                    key = it["Put"].get("Item", {})
                elif "Update" in it and it["Update"].get("TableName") == self.table:
                    key = it["Update"].get("Key", {})
                if _s(key, ATTR_PK) == pk:
                    return reasons[i]
            return None

        reason = refused(self.inbox_key(m))
        if reason is not None:
            if m.ordered and m.closed != CLOSED_RESTAGED:
                return self._duplicate(m, reason.get("Item"))
            return DuplicateError(f"message {m.key}: already applied")
        if not m.ordered:
            return error
        reason = refused(self.cursor_key(m))
        if reason is None:
            return error
        try:
            item = reason.get("Item")
            cursor, found = _cursor_seq(item)
            if not found and self.client is not None:
                item = self.client.get_item(TableName=self.table, Key=_key(self.cursor_key(m)), ConsistentRead=True).get("Item")
                cursor, _ = _cursor_seq(item)
        except ConsumeError as e:
            return ConsumeError(f"message {m.key}: {e}")
        if cursor == m.seq - 1:
            return error  # the cursor moved to its turn since: a retry goes through
        return OrderError(m.key, m.group, m.seq, cursor, item is not None and _bool(item, _JOINING) is True)

    def _duplicate(self, m: Message, old: Mapping[str, Any] | None) -> BaseException:
        dup = DuplicateError(f"message {m.key}: already applied")
        if not old and self.client is not None:
            old = self.client.get_item(TableName=self.table, Key=_key(self.inbox_key(m)), ConsistentRead=True).get("Item")
        if not old:
            return dup
        group = _s(old, _GROUP)
        try:
            seq, _ = _cursor_seq(old)
        except ConsumeError:
            seq = 0
        same_place = group is not None and group == m.group and seq == m.seq
        if _bool(old, _APPLIED) is False:
            if same_place:
                return DuplicateError(f"message {m.key}, place {m.seq} of group {m.group}: a copy of a message recorded late and not applied")
            return LateError(f"message {m.key}, place {m.seq} of group {m.group}: recorded late, not applied (its key is recorded late at place {seq} already)")
        if same_place:
            return dup
        applied = f"applied late, at place {seq}" if _LATE_AFTER in old else f"applied at place {seq}"
        if self.client is None:
            return ConsumeError(f"message {m.key}, place {m.seq} of group {m.group}: its key was {applied}, and closing this place needs the Inbox's DynamoDB client")
        try:
            self.apply(replace(m, closed=CLOSED_RESTAGED))
        except LateError:
            return DuplicateError(f"message {m.key}, place {m.seq} of group {m.group}: its key was {applied}, and its group went past this place: already applied")
        except DuplicateError:
            pass
        except Exception as e:
            return e
        return DuplicateError(f"message {m.key}, place {m.seq} of group {m.group}: its key was {applied}; this place is closed ({CLOSED_RESTAGED}): already applied")

    def apply(self, m: Message, effect: Sequence[Mapping[str, Any]] = ()) -> None:
        """Run, in one transaction, the effect's items and the message's
        transact_items. Returns when the effect committed (or, under
        LatePolicy.APPLY, committed late); raises DuplicateError (done
        already: acknowledge), OrderError (a gap: retry later), LateError
        (recorded, not applied: acknowledge). A message that closes a
        place has no effect and is recorded as close records it."""
        if self.client is None:
            raise ConsumeError("inbox: apply needs a DynamoDB client")
        if m.closed:
            effect = ()
        items = self._items(m, None, None, False)
        try:
            self._run(m, effect, items)
            return
        except OrderError as e:
            order = e
        if order.gap:
            if self.gaps == GapPolicy.PASS or (self.join == JoinPolicy.WHERE_SEEN and (order.cursor == 0 or order.joining)):
                self._run(m, effect, self.transact_items_past(m, order))
                return
            raise order
        if self._applied_before(m):
            raise DuplicateError(f"message {m.key}, place {m.seq} of group {m.group}: already applied (its inbox item is gone: past its TTL)")
        if self.late == LatePolicy.APPLY and not m.closed:
            self._run(m, effect, self.transact_items_late(m, order))
            return
        self._run(m, (), self.transact_items_record_late(m, order))
        raise LateError(f"recorded late, not applied: its group went past it: {order}", order)

    def close(self, m: Message) -> None:
        """Record a message that closes a place: its inbox item and its
        group's cursor moved past the place, with no effect. Ordered like a
        row: OrderError before its turn, DuplicateError for a copy,
        LateError once the group went past."""
        if not m.closed:
            raise ConsumeError(f"inbox: message {m.key} closes no place: apply it")
        self.apply(m)

    # Consumers wired by construction.

    def _applier(self, effect: Effect) -> ApplyFunc:
        """The apply of a consumer whose effect is effect: the effect's
        items and the Inbox's in one transaction."""

        def apply(m: Message) -> None:
            self.apply(m, effect(m))

        return apply

    def handler(self, effect: Effect, **handler_kwargs: Any) -> Handler:
        """A Lambda Handler bound to this Inbox (Go's Inbox.Handler):
        effect(message) returns the consumer's own transaction items for a
        message (may be empty), which commit with the Inbox's, so each
        effect is made once and each group's in order; a message that
        closes a place goes to close, never to effect. Duplicates and late
        rows are acknowledged and reported to on_result. handler_kwargs
        are Handler's other fields (on_failure, on_result, reserve_ms,
        logger, metrics); closed is the Inbox's, which is the point."""
        return Handler(self._applier(effect), closed=self.close, **handler_kwargs)

    def poller(self, sqs: Any, queue_url: str, effect: Effect, **poller_kwargs: Any) -> Poller:
        """A receive loop bound to this Inbox (Go's Inbox.Poller), with
        effect as handler's; poller_kwargs are Poller's options
        (concurrency, visibility, wait, on_failure, on_result, logger,
        metrics). Call run() on it."""
        return Poller(sqs, queue_url, self._applier(effect), self.close, **poller_kwargs)

    def record_handler(self, effect: Effect, **kwargs: Any) -> Callable[[Any], None]:
        """A Powertools record handler (consume.record_handler) bound to
        this Inbox, with effect as handler's; kwargs are record_handler's
        (logger, metrics, on_result)."""
        return record_handler(self._applier(effect), self.close, **kwargs)

    def _get(self, pk: str) -> Mapping[str, Any]:
        out = self.client.get_item(TableName=self.table, Key=_key(pk), ConsistentRead=True)
        item: Mapping[str, Any] = out.get("Item") or {}
        return item

    def _applied_before(self, m: Message) -> bool:
        """Whether a message its group went past was applied in its turn,
        its inbox item gone since (Go's appliedBefore)."""
        if m.closed:
            return _applied_at(self._get(f"inbox {self.consumer} {m.key}"), m)
        if self.gaps != GapPolicy.WAIT:
            return False
        closing = self._get(self.inbox_key(Message(key=m.key, closed="any")))
        if closing or self.join != JoinPolicy.WHERE_SEEN:
            return not closing
        joined = self._get(self.cursor_key(m)).get(_JOINED)
        if not isinstance(joined, Mapping) or "N" not in joined:
            return True  # the group started at place 1
        try:
            at = int(joined["N"])
        except ValueError:
            raise ConsumeError(f"message {m.key}: its group's cursor has a joined that is no whole number") from None
        return m.seq >= at

    def _run(self, m: Message, effect: Sequence[Mapping[str, Any]], items: list[TransactItem]) -> None:
        tx = [*effect, *items]
        error: BaseException | None = None
        try:
            self.client.transact_write_items(TransactItems=tx)
        except ClientError as e:
            error = e
        outcome = self.classify(m, tx, error)
        if outcome is error and error is not None:
            raise error
        if outcome is not None:
            raise outcome


def _applied_at(item: Mapping[str, Any], m: Message) -> bool:
    """Whether a row's inbox item records its effect at m's place."""
    if not item:
        return False
    if _bool(item, _APPLIED) is False:
        return False
    if _SEQ not in item:
        return True
    group = _s(item, _GROUP)
    try:
        seq, _ = _cursor_seq(item)
    except ConsumeError:
        return False
    return group is not None and group == m.group and seq == m.seq
