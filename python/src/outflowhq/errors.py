"""Errors, each with a kind the Go package and the conformance vectors share."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Kind(StrEnum):
    """Why something failed, named as conformance/producer/*.json names it.

    Each kind stands for one of the Go package's sentinel errors
    (``errors.Is`` there, ``error.kind`` here).
    """

    # A row refused before anything is sent (outflow.Err* of row.go).
    EMPTY_QUEUE = "empty_queue"  # ErrEmptyQueue
    INVALID_KEY = "invalid_key"  # ErrInvalidKey
    EMPTY_PAYLOAD = "empty_payload"  # ErrEmptyPayload
    TOO_LARGE = "too_large"  # ErrPayloadTooLarge: the message or event
    TOO_MANY_ATTRIBUTES = "too_many_attributes"  # ErrTooManyAttributes
    ATTRIBUTE_NAME = "attribute_name"  # ErrAttributeName
    ATTRIBUTE_VALUE = "attribute_value"  # ErrAttributeValue
    GROUP_REQUIRED = "group_required"  # ErrGroupRequired
    INVALID_ID = "invalid_id"  # ErrInvalidGroup
    GROUP_NOT_FIFO = "group_not_fifo"  # ErrGroupNotFIFO: a group on a route that is not FIFO
    NOT_JSON = "not_json"  # ErrNotJSON
    EVENT_FIELD = "event_field"  # ErrEventField
    ITEM_TOO_LARGE = "item_too_large"  # ErrItemTooLarge: the DynamoDB item
    NO_ROUTE = "no_route"  # ErrNoRoute
    ORDERED_ROUTE = "ordered_route"  # ErrOrderedRoute
    DUPLICATE_KEY = "duplicate_key"  # ErrDuplicateKey
    TOO_MANY_ITEMS = "too_many_items"  # ErrTooManyItems
    ORDER_UNKNOWN = "order_unknown"  # ErrOrderUnknown
    # Staging outside a transaction (Put).
    KEY_CONFLICT = "key_conflict"  # ErrKeyConflict
    NOT_STAGED = "not_staged"  # ErrNotStaged
    GROUP_RACE = "group_race"  # ErrGroupRace
    # Why a transaction was canceled, per item (ItemError.Reason).
    ALREADY_STAGED = "already_staged"  # ErrAlreadyStaged
    KEY_GONE = "key_gone"  # ErrKeyGone
    CONDITION_FAILED = "condition_failed"  # ErrConditionFailed
    TRANSACTION_CONFLICT = "transaction_conflict"  # ErrTransactionConflict
    THROTTLED = "throttled"  # ErrThrottled
    TRANSACTION_CANCELED = "transaction_canceled"  # *TransactError
    # The configuration.
    INVALID_CONFIG = "invalid_config"  # NewProducer's refusals
    NOT_PUBLISHED = "not_published"  # ErrNotPublished
    MALFORMED = "malformed"  # a published item this reader cannot read
    PUBLISHED_MISMATCH = "published_mismatch"  # ErrPublishedMismatch


class OutflowError(Exception):
    """Every error this package raises; ``kind`` says which."""

    kind: Kind

    def __init__(self, kind: Kind, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class InvalidRowError(OutflowError):
    """A row refused before anything was sent: it would not reach its target
    as written (the dispatcher's own checks), or cannot be staged as given."""


class ConfigError(OutflowError):
    """A configuration the producer refuses, or a published one it cannot
    read or does not agree with."""


class StagingError(OutflowError):
    """A row ``Producer.put`` could not stage: its key is staged with other
    content (key_conflict), other producers kept winning its ordered group
    (group_race), or an earlier row of its group failed (not_staged)."""

    def __init__(self, kind: Kind, message: str, key: str = "") -> None:
        super().__init__(kind, message)
        self.key = key


class PutError(OutflowError):
    """Some rows given to ``Producer.put`` were not staged.

    ``errors[i]`` is why ``rows[i]`` was not (None: it was staged), and
    ``keys[i]`` its key. ``kind`` is the first failure's.
    """

    def __init__(self, keys: Sequence[str], errors: Sequence[OutflowError | None]) -> None:
        failed = [(i, e) for i, e in enumerate(errors) if e is not None]
        super().__init__(failed[0][1].kind, "; ".join(f"row {i}: {e}" for i, e in failed))
        self.keys = list(keys)
        self.errors = list(errors)

    def has(self, kind: Kind | str) -> bool:
        """Whether any row failed for kind."""
        return any(e is not None and e.kind == kind for e in self.errors)


@dataclass
class ItemError:
    """Why one item of a canceled transaction failed."""

    index: int
    """The item's position in TransactItems."""
    code: str
    """DynamoDB's cancellation reason code."""
    message: str = ""
    table: str = ""
    key: Mapping[str, Any] | None = None
    """The item's key, for an Update, a Delete or a ConditionCheck."""
    row: str = ""
    """The outbox row's key when the item stages a row."""
    queue: str = ""
    group: str = ""
    """The ordered group when the item moves its tail."""
    reason: Kind | None = None
    """already_staged, key_conflict, key_gone, group_race, condition_failed,
    transaction_conflict or throttled; None for a code Outflow does not
    explain (a validation error, which ``code`` says), or a staged key whose
    row could not be read to compare (``error`` says why)."""
    error: BaseException | None = field(default=None, repr=False)
    # Set for an item of a transaction Producer.transact sent: it builds the
    # rows' items itself, so a lost group race is retried by calling it
    # again, not by building items.
    _by_transact: bool = field(default=False, init=False, repr=False, compare=False)

    def __str__(self) -> str:
        if self.row:
            what = f"outbox row {self.row}"
        elif self.group:
            what = f"tail of group {self.group!r} of {self.queue}"
        elif self.key is not None:
            what = f"table {self.table} key {_format_key(self.key)}"
        else:
            what = f"put into table {self.table}"
        why = self.code
        if self.reason is Kind.GROUP_RACE and self._by_transact:
            why = "another producer staged into the group first (call transact again: it builds the rows' items anew)"
        elif self.reason is Kind.GROUP_RACE:
            why = "another producer staged into the group first (build the row's items again with transact_items)"
        elif self.reason is not None:
            why = self.reason.value.replace("_", " ")
        elif self.error is not None:
            why = f"key staged already, and reading it to compare its content failed: {self.error}"
        elif self.message:
            why += ": " + self.message
        return f"item {self.index} ({what}): {why}"


def _format_key(key: Mapping[str, Any]) -> str:
    parts = []
    for name in sorted(key):
        value = key[name]
        if isinstance(value, Mapping) and "S" in value:
            parts.append(f"{name}={value['S']!r}")
        elif isinstance(value, Mapping) and "N" in value:
            parts.append(f"{name}={value['N']}")
        else:
            parts.append(f"{name}=(binary)")
    return ",".join(parts)


class TransactError(OutflowError):
    """A TransactWriteItems cancellation, explained per item: nothing in the
    transaction was written. ``items`` are the items DynamoDB gave a reason
    for; ``__cause__`` is botocore's error."""

    def __init__(self, items: Sequence[ItemError], cause: BaseException) -> None:
        if items:
            text = "; ".join(str(i) for i in items)
        else:
            text = str(cause)
        super().__init__(Kind.TRANSACTION_CANCELED, "transaction canceled, nothing written: " + text)
        self.items = list(items)
        self.__cause__ = cause

    def has(self, kind: Kind | str) -> bool:
        """Whether any item failed for kind (Go: errors.Is)."""
        return any(i.reason == kind for i in self.items)

    @property
    def retryable(self) -> bool:
        """Whether sending the transaction again, with the ordered rows'
        items built anew by transact_items, may succeed: every item failed
        only because another writer got there first or the table was over
        its capacity (back off first)."""
        again = {Kind.GROUP_RACE, Kind.TRANSACTION_CONFLICT, Kind.THROTTLED}
        return bool(self.items) and all(i.reason in again for i in self.items)
