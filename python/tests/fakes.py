"""A stand-in DynamoDB client for the offline vectors: GetItem finds the
vector's table items; writes are refused (the offline vectors send
nothing)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from vectors import to_boto


class FakeDynamoDB:
    def __init__(self, items: Iterable[Mapping[str, Any]] = ()) -> None:
        self.items = {str(i["pk"]["S"]): to_boto(dict(i)) for i in items}
        self.reads: list[str] = []

    def get_item(self, *args: Any, **kwargs: Any) -> Any:
        key = kwargs["Key"]["pk"]["S"]
        assert kwargs.get("ConsistentRead") is True, "reads are strongly consistent"
        self.reads.append(key)
        item = self.items.get(key)
        return {"Item": item} if item is not None else {}

    def put_item(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the offline vectors write nothing")

    def transact_write_items(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the offline vectors write nothing")
