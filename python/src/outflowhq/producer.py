"""The producer: validates rows and stages them, in your transaction or on
their own, ordered groups as a chain."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any

from botocore.exceptions import ClientError

from . import _item
from . import _target as target
from ._trace import current_trace_parent
from .errors import (
    ConfigError,
    InvalidRowError,
    ItemError,
    Kind,
    OutflowError,
    PutError,
    StagingError,
    TransactError,
)
from .published import Config, DynamoDBClient, _routes_from, load_published
from .row import Row, check

#: How many items DynamoDB takes in one TransactWriteItems.
MAX_TRANSACT_ITEMS = 100

TransactWriteItem = dict[str, Any]

_PUBLISHED_ORDER_TTL = 60.0
_GROUP_TRIES = 20
_THROTTLED = {"ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded"}


@dataclass(frozen=True)
class _Prepared:
    key: str
    queue: str
    payload: bytes
    attributes: dict[str, str] | None
    group: str
    not_before_ms: int

    def content(self) -> _item.Content:
        attrs = dict(self.attributes or {})
        attrs.pop(target.ATTR_TRACE_PARENT, None)
        return _item.Content(self.queue, self.payload, attrs, self.group, self.not_before_ms)


@dataclass(frozen=True)
class _Tail:
    key: str = ""
    seq: int = 0


class _OrderedRoutes:
    """Which routes the producer stages as ordered: those Config lists, or
    with none listed those the dispatcher publishes, read when first needed
    and again once a minute."""

    def __init__(self, routes: Sequence[str] | None, read: Callable[[], set[str]], now: Callable[[], float]) -> None:
        self._fixed: set[str] | None = None
        if routes is not None:
            for q in routes:
                if not target.fifo_route(q):
                    raise ConfigError(Kind.INVALID_CONFIG, f"ordered route {q!r}: only FIFO routes (names ending in .fifo) keep an order per group")
            self._fixed = set(routes)
        self._read, self._now = read, now
        self._lock = threading.Lock()
        self._set: set[str] | None = None
        self._at = 0.0

    def ordered(self, queue: str) -> tuple[bool, OutflowError | None]:
        if self._fixed is not None:
            return queue in self._fixed, None
        if not target.fifo_route(queue):
            return False, None
        try:
            return queue in self._current(), None
        except OutflowError as e:
            return False, OutflowError(Kind.ORDER_UNKNOWN, f"route {queue}: whether the route is ordered is unknown: {e}")
        except ClientError as e:
            return False, OutflowError(Kind.ORDER_UNKNOWN, f"route {queue}: whether the route is ordered is unknown: {e}")

    def known(self, queue: str) -> bool:
        if self._fixed is not None:
            return queue in self._fixed
        with self._lock:
            return self._set is not None and queue in self._set

    def _current(self) -> set[str]:
        with self._lock:
            if self._set is not None and self._now() - self._at < _PUBLISHED_ORDER_TTL:
                return self._set
            try:
                found = self._read()
            except ConfigError as e:
                if e.kind is Kind.NOT_PUBLISHED:
                    raise ConfigError(
                        e.kind,
                        f"{e}: list the ordered routes in Config.ordered (an empty list for none), or run the dispatcher once to publish them",
                    ) from e
                raise
            self._set, self._at = found, self._now()
            return found


class Producer:
    """Stages rows into one outbox table. Safe to share between threads.

    ``clock`` (now, an aware datetime), ``stage_id`` (a new stage id) and
    ``trace_parent`` (the current W3C trace context, "" for none) are for
    tests and tracing setups; the defaults are the wall clock, 80 random
    bits, and OpenTelemetry's current span or Lambda's X-Ray header.
    """

    def __init__(
        self,
        client: DynamoDBClient,
        config: Config,
        *,
        clock: Callable[[], datetime] | None = None,
        stage_id: Callable[[], str] | None = None,
        trace_parent: Callable[[], str] | None = None,
    ) -> None:
        shards = config.shards or 4
        problems = []
        if not config.table:
            problems.append("table must not be empty")
        if not 1 <= shards <= 1000:
            problems.append(f"shards {shards} must be in [1, 1000]")
        if problems:
            raise ConfigError(Kind.INVALID_CONFIG, "invalid store config: " + "; ".join(problems))
        self._client = client
        self._table = config.table
        self._shards = shards
        self._max_bytes = config.max_message_bytes
        self._lean = config.lean
        self._clock = clock or (lambda: datetime.now(timezone.utc))
        self._stage_id = stage_id or _item.new_stage_id
        self._trace = trace_parent or current_trace_parent
        table = config.table

        def read() -> set[str]:
            return set(load_published(client, table).ordered)

        self._ordered = _OrderedRoutes(config.ordered, read, time.monotonic)
        self._targets: dict[str, target.Target] | None = None
        self._routes_from = "given"
        if config.routes is not None and _given(config.routes):
            try:
                self._targets = target.parse_routes(config.routes)
            except ConfigError as e:
                raise ConfigError(Kind.INVALID_CONFIG, f"routes: {e}") from None
            self._routes_from = _routes_from(config)
        if self._targets is not None:
            for q in config.ordered or ():
                if q not in self._targets:
                    raise ConfigError(Kind.INVALID_CONFIG, f"ordered route {q!r} is not in the routes given ({','.join(sorted(self._targets))})")

    @classmethod
    def from_published(cls, client: DynamoDBClient, table: str, config: Config | None = None, **kwargs: Any) -> Producer:
        """A producer configured by the dispatcher's published
        configuration in table (see Published.apply). A row of a route the
        dispatcher does not publish is refused naming the table and its
        routes; a table that does not exist raises botocore's error,
        naming the table (load_published)."""
        cfg = load_published(client, table).apply(config or Config(table=table))
        return cls(client, cfg, **kwargs)

    @property
    def table(self) -> str:
        return self._table

    # -- validation --------------------------------------------------------

    def _prepare(self, row: Row, trace: bool) -> tuple[_Prepared, bool]:
        """Validates row and fills in its key (and with trace an empty trace
        context); returns it and whether its route is ordered."""
        prepared, ordered, error = self._try_prepare(row, trace)
        if error is not None:
            raise error
        assert prepared is not None
        return prepared, ordered

    def _try_prepare(self, row: Row, trace: bool) -> tuple[_Prepared | None, bool, OutflowError | None]:
        """_prepare, with a refusal returned: ordered then still says where
        the row belonged (put holds its group's later rows back)."""
        t = target.Target(fifo=target.fifo_route(row.queue))
        if self._targets is not None:
            routed = self._targets.get(row.queue)
            if routed is None and row.queue.strip():
                return None, False, InvalidRowError(
                    Kind.NO_ROUTE,
                    f"no such route: route {row.queue!r} is not one of the routes {self._routes_from} ({', '.join(sorted(self._targets))})",
                )
            t = routed or target.Target()
        ordered, unknown = self._ordered.ordered(row.queue)
        if unknown is not None:
            ordered = True  # checked as strictly as an ordered row
        if trace and not row.trace_parent and target.ATTR_TRACE_PARENT not in (row.attributes or {}):
            tp = self._trace()
            if tp:
                traced = replace(row, trace_parent=tp)
                try:
                    check(traced, t, self._max_bytes, ordered)
                    row = traced
                except InvalidRowError:
                    pass  # the context's trace goes only where it fits
        try:
            attrs = check(row, t, self._max_bytes, ordered)
        except InvalidRowError as e:
            return None, ordered, e
        if unknown is not None:
            return None, ordered, unknown
        key = row.key or _item.new_ulid(self._clock())
        nb = _item.epoch_ms(row.not_before) if row.not_before is not None else 0
        return _Prepared(key, row.queue, row.payload_bytes, attrs, row.group, nb), ordered, None

    # -- items -------------------------------------------------------------

    def _stage_item(self, row: _Prepared, now: datetime, seq: int = 0, prev: str = "") -> _item.Item:
        """The item that stages row, pending, due at its not_before or now."""
        if _item.reserved_key(row.key):
            raise InvalidRowError(Kind.INVALID_KEY, f"row key {row.key!r} is reserved")
        now_ms = _item.epoch_ms(now)
        item: _item.Item = {_item.PK: {"S": row.key}, _item.QUEUE: {"S": row.queue}}
        if row.attributes is not None:
            item[_item.ATTRIBUTES] = {"M": {k: {"S": v} for k, v in row.attributes.items()}}
        if row.group:
            item[_item.GROUP] = {"S": row.group}
        if row.not_before_ms:
            item[_item.NOT_BEFORE] = {"N": str(row.not_before_ms)}
        if seq:
            item[_item.SEQ] = {"N": str(seq)}
        if prev:
            item[_item.PREV] = {"S": prev}
        item[_item.STATUS] = {"S": _item.STATUS_PENDING}
        item[_item.ATTEMPT] = {"N": "0"}
        item[_item.CREATED_AT] = {"N": str(now_ms)}
        due = row.not_before_ms if row.not_before_ms > now_ms else now_ms
        if due:
            item[_item.DUE_AT] = {"N": str(due)}
        shard_key = _item.group_key(row.queue, row.group) if seq > 0 and row.group else row.key
        if not (self._lean and seq == 0 and not row.not_before_ms):
            # A lean row (unordered, due at once) stays out of the due
            # index: the wake sends it from its stream record.
            item[_item.SHARD] = {"S": _item.shard_of(shard_key, self._shards)}
        item[_item.STAGE_ID] = {"S": self._stage_id()}
        item[_item.ERRORS] = {"L": []}
        item[_item.PAYLOAD] = _item.payload_value(row.payload)
        size, room = _item.base_size(item), _item.growth(row.queue)
        if size + room > _item.ITEM_LIMIT:
            raise InvalidRowError(
                Kind.ITEM_TOO_LARGE,
                f"item too large: row {row.key} is {size} bytes without its delivery state; with the {room} bytes that may add, "
                f"it would pass the {_item.ITEM_LIMIT}-byte item limit",
            )
        return item

    def _put(self, item: _item.Item) -> TransactWriteItem:
        return {
            "Put": {
                "TableName": self._table,
                "Item": item,
                "ConditionExpression": "attribute_not_exists (#pk)",
                "ExpressionAttributeNames": {"#pk": _item.PK},
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }

    def _group_update(self, queue: str, group: str, tail: _Tail, last: str, seq: int) -> TransactWriteItem:
        """The update that moves an ordered group's tail from tail to
        (last, seq), on condition that no other row was staged since."""
        names = {"#tail": _item.TAIL, "#seq": _item.SEQ}
        values: dict[str, Any] = {":tail": {"S": last}, ":seq": {"N": str(seq)}}
        if tail.seq > 0:
            condition = "#seq = :read"
            values[":read"] = {"N": str(tail.seq)}
        else:
            condition = "attribute_not_exists (#pk)"
            names["#pk"] = _item.PK
        return {
            "Update": {
                "TableName": self._table,
                "Key": {_item.PK: {"S": _item.group_key(queue, group)}},
                "ConditionExpression": condition,
                "UpdateExpression": "SET #tail = :tail, #seq = :seq",
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": values,
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }

    def group_tail(self, queue: str, group: str) -> tuple[str, int]:
        """An ordered group's tail, its last row's key and place, read with
        a strongly consistent read: ("", 0) before its first row."""
        t = self._tail(queue, group)
        return t.key, t.seq

    def _tail(self, queue: str, group: str) -> _Tail:
        key = _item.group_key(queue, group)
        out = self._client.get_item(TableName=self._table, Key={_item.PK: {"S": key}}, ConsistentRead=True)
        item = out.get("Item")
        if not item:
            return _Tail()
        tail, seq = item.get(_item.TAIL), item.get(_item.SEQ)
        try:
            n = int(seq["N"]) if isinstance(seq, Mapping) and "N" in seq else 0
        except ValueError:
            n = 0
        if not isinstance(tail, Mapping) or "S" not in tail or n < 1:
            raise OutflowError(Kind.MALFORMED, f"malformed item: group item {key!r} needs a string tail and a positive whole seq")
        return _Tail(str(tail["S"]), n)

    def _chain(self, rows: Sequence[_Prepared], now: datetime, tail: _Tail) -> list[TransactWriteItem]:
        """The puts of rows, one ordered group's, after tail, then the
        group's update."""
        items = []
        prev, seq = tail.key, tail.seq
        for row in rows:
            seq += 1
            items.append(self._put(self._stage_item(row, now, seq, prev)))
            prev = row.key
        items.append(self._group_update(rows[0].queue, rows[0].group, tail, prev, seq))
        return items

    def transact_item(self, row: Row) -> TransactWriteItem:
        """Validates row and returns the conditional put that stages it, for
        your own TransactWriteItems (the transaction fails if the key is
        staged already: classify says how). An empty key is filled with a
        new ULID: read it back from item["Put"]["Item"]["pk"]["S"].

        A row of an ordered route needs transact_items."""
        prepared, ordered = self._prepare(row, trace=False)
        if ordered:
            raise InvalidRowError(Kind.ORDERED_ROUTE, f"ordered route: route {row.queue} is ordered: stage its rows with transact_items")
        return self._put(self._stage_item(prepared, self._clock()))

    def transact_items(self, rows: Sequence[Row], *, own_items: int = 0) -> list[TransactWriteItem]:
        """Validates rows and returns the writes that stage them, for your
        own TransactWriteItems: items[i] is the put of rows[i], then one
        update per ordered group, in the order the groups first appear.

        Rows of an ordered route are appended to their group as a chain in
        the order given (one consistent read of each group's tail). If
        another producer stages into the group before your transaction
        commits, DynamoDB cancels it (classify: group_race or
        transaction_conflict): call transact_items again and retry.
        own_items counts your own writes against the 100 a transaction
        takes."""
        return self._stage_rows(rows, own_items)[1]

    def _stage_rows(self, rows: Sequence[Row], own: int) -> tuple[list[str], list[TransactWriteItem]]:
        prepared: list[_Prepared] = []
        ordered: list[bool] = []
        seen: dict[str, int] = {}
        groups: dict[tuple[str, str], list[int]] = {}
        for i, r in enumerate(rows):
            try:
                p, o = self._prepare(r, trace=True)
            except OutflowError as e:
                e.args = (f"row {i}: {e}",)
                raise
            if p.key in seen:
                raise InvalidRowError(
                    Kind.DUPLICATE_KEY, f"rows {seen[p.key]} and {i}: key given twice: both have key {p.key!r}, and a transaction writes an item once"
                )
            seen[p.key] = i
            prepared.append(p)
            ordered.append(o)
            if o:
                groups.setdefault((p.queue, p.group), []).append(i)
        n = own + len(rows) + len(groups)
        if n > MAX_TRANSACT_ITEMS:
            raise InvalidRowError(
                Kind.TOO_MANY_ITEMS,
                f"too many items for one transaction: {len(rows)} rows in {len(groups)} ordered groups need {n} items"
                + (f" with the {own} of yours" if own else "")
                + f", and DynamoDB takes at most {MAX_TRANSACT_ITEMS} in one transaction",
            )
        now = self._clock()
        tails = {g: self._tail(*g) for g in groups}
        # Built in row order, each row's place from its group's tail.
        items: list[TransactWriteItem] = []
        places = {g: (t.key, t.seq) for g, t in tails.items()}
        for i, p in enumerate(prepared):
            if not ordered[i]:
                items.append(self._put(self._stage_item(p, now)))
                continue
            g = (p.queue, p.group)
            prev, seq = places[g]
            items.append(self._put(self._stage_item(p, now, seq + 1, prev)))
            places[g] = (p.key, seq + 1)
        for g in groups:
            last, seq = places[g]
            items.append(self._group_update(g[0], g[1], tails[g], last, seq))
        return [p.key for p in prepared], items

    # -- sending -----------------------------------------------------------

    def transact(self, rows: Sequence[Row], items: Sequence[TransactWriteItem] = (), **kwargs: Any) -> list[str]:
        """Stages rows together with your own writes (items) in one
        TransactWriteItems: the rows' writes go after yours, the
        transaction is sent once, and a cancellation raises TransactError
        (classify). Returns the rows' keys. kwargs go to
        transact_write_items (ReturnConsumedCapacity, say); a
        ClientRequestToken is refused, since each call stages its rows anew
        (keyed rows make a resend safe: already_staged says it committed)."""
        if "ClientRequestToken" in kwargs:
            raise ValueError(
                "transact: ClientRequestToken cannot make a resend idempotent here (each call stages its rows anew): "
                "give rows keys, and take already_staged as committed"
            )
        keys, mine = self._stage_rows(rows, len(items))
        sent = [*items, *mine]
        try:
            self._client.transact_write_items(TransactItems=sent, **kwargs)
        except ClientError as e:
            raise self._explain(e, sent, by_transact=True) from e
        return keys

    def classify(self, error: BaseException, items: Sequence[TransactWriteItem]) -> BaseException:
        """Explains error, what transact_write_items raised for items (as
        sent, in order): a cancellation becomes a TransactError naming each
        failed item; any other error comes back as it is."""
        return self._explain(error, items, by_transact=False)

    def _explain(self, error: BaseException, items: Sequence[TransactWriteItem], *, by_transact: bool) -> BaseException:
        """classify, for a transaction transact sent (by_transact) or the
        caller did: a lost group race's hint says which call builds the
        items again."""
        if not isinstance(error, ClientError) or error.response.get("Error", {}).get("Code") != "TransactionCanceledException":
            return error
        reasons = error.response.get("CancellationReasons") or []
        out: list[ItemError] = []
        for i, reason in enumerate(reasons):
            code = reason.get("Code") or ""
            if code in ("", "None"):
                continue
            ie = ItemError(index=i, code=code, message=reason.get("Message") or "")
            if i < len(items):
                self._describe(ie, items[i])
            if code == "TransactionConflict":
                ie.reason = Kind.TRANSACTION_CONFLICT
            elif code in _THROTTLED:
                ie.reason = Kind.THROTTLED
            elif code != "ConditionalCheckFailed":
                pass
            elif ie.row:
                self._staged_reason(ie, items[i], reason.get("Item"))
            elif ie.group:
                ie.reason = Kind.GROUP_RACE
            else:
                ie.reason = Kind.CONDITION_FAILED
            ie._by_transact = by_transact
            out.append(ie)
        return TransactError(out, error)

    def _describe(self, ie: ItemError, item: Mapping[str, Any]) -> None:
        if "Put" in item:
            put = item["Put"]
            ie.table = str(put.get("TableName", ""))
            if ie.table == self._table:
                ie.row = _item.staged_row_key(put.get("Item") or {})
            return
        for op in ("Update", "Delete", "ConditionCheck"):
            if op in item:
                body = item[op]
                ie.table, ie.key = str(body.get("TableName", "")), body.get("Key")
                if op == "Update" and ie.table == self._table and ie.key is not None:
                    queue, group = _group_of(ie.key)
                    if queue and self._ordered.known(queue):
                        ie.queue, ie.group = queue, group
                return

    def _staged_reason(self, ie: ItemError, sent: Mapping[str, Any], current: Mapping[str, Any] | None) -> None:
        mine = _item.content_of(sent["Put"]["Item"])
        if mine is None:
            ie.reason = Kind.KEY_CONFLICT
            return
        if not current:
            try:
                out = self._client.get_item(TableName=self._table, Key={_item.PK: {"S": ie.row}}, ConsistentRead=True)
            except ClientError as e:
                ie.error = e
                return
            current = out.get("Item")
            if not current:
                ie.reason = Kind.KEY_GONE
                return
        theirs = _item.content_of(current)
        ie.reason = Kind.ALREADY_STAGED if theirs is not None and _item.same_content(theirs, mine) else Kind.KEY_CONFLICT

    def put(self, *rows: Row) -> list[str]:
        """Stages rows on their own (not in a transaction) and returns their
        keys. Idempotent: a key staged already with the same content is
        success. Rows of an ordered route are staged one after another per
        group, in the order given, retrying a lost race; a row after one
        that failed in its group is not staged (not_staged). Any failure
        raises PutError, whose errors say which rows failed and why."""
        keys = [""] * len(rows)
        errors: list[OutflowError | None] = [None] * len(rows)
        prepared: list[_Prepared | None] = [None] * len(rows)
        groups: dict[tuple[str, str], list[int]] = {}
        for i, r in enumerate(rows):
            p, ordered, errors[i] = self._try_prepare(r, trace=True)
            if p is not None:
                keys[i], prepared[i] = p.key, p
            if ordered:
                groups.setdefault((r.queue, r.group), []).append(i)
                continue
            p_i = prepared[i]
            if p_i is not None:
                errors[i] = self._stage_unordered(p_i)
        for (_, group), idx in groups.items():
            failed = False
            for i in idx:
                if failed:
                    errors[i] = StagingError(Kind.NOT_STAGED, f"not staged: an earlier row of group {group!r} failed", keys[i])
                    continue
                p_i = prepared[i]
                if errors[i] is None and p_i is not None:
                    errors[i] = self._stage_ordered(p_i)
                failed = errors[i] is not None
        if any(e is not None for e in errors):
            raise PutError(keys, errors)
        return keys

    def _stage_unordered(self, row: _Prepared) -> OutflowError | None:
        try:
            put = self._put(self._stage_item(row, self._clock()))["Put"]
        except OutflowError as e:
            return e
        try:
            self._client.put_item(**put)
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
            current: Any = e.response.get("Item")
            if current and _same(_item.content_of(current), row.content()):
                return None
            return StagingError(Kind.KEY_CONFLICT, f"key already staged with different content: {row.key}", row.key)
        return None

    def _stage_ordered(self, row: _Prepared) -> OutflowError | None:
        for attempt in range(_GROUP_TRIES):
            try:
                tail = self._tail(row.queue, row.group)
                items = self._chain([row], self._clock(), tail)
            except OutflowError as e:
                return e
            try:
                self._client.transact_write_items(TransactItems=items)
                return None
            except ClientError as e:
                if e.response.get("Error", {}).get("Code") != "TransactionCanceledException":
                    raise
                reasons = e.response.get("CancellationReasons") or []
                if reasons and reasons[0].get("Code") == "ConditionalCheckFailed":
                    current = reasons[0].get("Item")
                    if not current:
                        out = self._client.get_item(TableName=self._table, Key={_item.PK: {"S": row.key}}, ConsistentRead=True)
                        current = out.get("Item")
                    if current and _same(_item.content_of(current), row.content()):
                        return None
                    return StagingError(Kind.KEY_CONFLICT, f"key already staged with different content: {row.key}", row.key)
            # The group moved (another producer staged first) or another
            # transaction held it: read the tail again after a short pause.
            if attempt < _GROUP_TRIES - 1:
                time.sleep((1 + random.randrange(10 << min(attempt, 4))) / 1000)
        return StagingError(
            Kind.GROUP_RACE,
            f"stage {row.key} in group {row.group!r} of {row.queue}: other producers kept staging into the ordered group first",
            row.key,
        )


def _same(theirs: _item.Content | None, mine: _item.Content) -> bool:
    """Whether the row staged under a key (theirs) is the one being staged
    again: a retry, not a key conflict."""
    return theirs is not None and _item.same_content(theirs, mine)


def _given(routes: Mapping[str, str] | str | None) -> bool:
    """Whether routes are given: "" (blank) and an empty mapping are not."""
    return bool(routes.strip()) if isinstance(routes, str) else bool(routes)


def _group_of(key: Mapping[str, Any]) -> tuple[str, str]:
    """An ordered group's item key read back: "group <queue> <group>"."""
    pk = key.get(_item.PK)
    if not isinstance(pk, Mapping) or "S" not in pk:
        return "", ""
    parts = str(pk["S"]).split(" ", 2)
    if len(parts) != 3 or _item.group_key(parts[1], parts[2]) != pk["S"] or parts[0] != "group":
        return "", ""
    return parts[1], parts[2]
