"""The dispatcher's published configuration (docs/published-config.md) and
the producer's Config."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from typing import Any, Protocol

from botocore.exceptions import ClientError

from . import _item
from ._target import parse_routes
from .errors import ConfigError, Kind

CONFIG_FORMAT = 1


class DynamoDBClient(Protocol):
    """The part of a boto3 DynamoDB client the producer calls:
    ``boto3.client("dynamodb")`` is one, and so is a wrapper of your own."""

    def get_item(self, *args: Any, **kwargs: Any) -> Any: ...

    def put_item(self, *args: Any, **kwargs: Any) -> Any: ...

    def transact_write_items(self, *args: Any, **kwargs: Any) -> Any: ...


@dataclass(frozen=True)
class Config:
    """Where and how rows are staged.

    ``shards`` must equal the dispatcher's OUTFLOW_SHARDS (0: 4) and
    ``max_message_bytes`` its OUTFLOW_MAX_MESSAGE_BYTES (0: 262144).
    ``ordered`` lists the ordered routes; None reads them from the
    published configuration when a row of a FIFO route is first staged
    (and once a minute after), an empty list says none. ``routes`` is the
    dispatcher's OUTFLOW_ROUTES (its string, or a mapping of route name to
    target): given, each row is checked against its route's target and a
    route not in it is refused; without, every row is checked against
    SQS's rules. ``lean`` stages unordered rows due at once outside the due
    index, for a dispatcher that runs lean (Published.apply sets it from
    what the dispatcher publishes; as Go's Config.Lean).
    """

    table: str = ""
    shards: int = 0
    max_message_bytes: int = 0
    ordered: Sequence[str] | None = None
    routes: Mapping[str, str] | str | None = None
    lean: bool = False
    # Set by Published.apply: the table it read routes from, and those
    # routes. A producer whose routes are still those refuses a row of
    # another route naming the table, as outflow enqueue does. Neither is
    # compared, shown or copied by dataclasses.replace.
    _published_in: str = field(default="", init=False, repr=False, compare=False)
    _published_routes: Mapping[str, str] | None = field(default=None, init=False, repr=False, compare=False)


@dataclass(frozen=True)
class Published:
    """The configuration the dispatcher runs with, as its functions publish
    it in the outbox table."""

    table: str
    routes: Mapping[str, str]
    ordered: Mapping[str, str]
    """Each ordered route and what a dead-lettered head does to its group."""
    shards: int
    max_message_bytes: int
    revision: int
    published_at: datetime
    published_by: str = ""
    unsure_wait: timedelta | None = field(default=None)
    lean: bool = False
    """The dispatcher's OUTFLOW_LEAN: rows may be staged outside the due index."""

    def apply(self, config: Config | None = None) -> Config:
        """config with what this publishes filled in where it leaves a
        field unset; a field config sets must agree, or ConfigError
        (published_mismatch) names each difference."""
        cfg = config or Config()
        diffs: list[str] = []
        if not cfg.table:
            cfg = replace(cfg, table=self.table)
        elif self.table and cfg.table != self.table:
            diffs.append(f"table: published in {self.table}, Config has {cfg.table}")
        if cfg.shards == 0:
            cfg = replace(cfg, shards=self.shards)
        elif cfg.shards != self.shards:
            diffs.append(f"shards: published {self.shards}, Config has {cfg.shards}")
        if cfg.max_message_bytes == 0:
            cfg = replace(cfg, max_message_bytes=self.max_message_bytes)
        elif cfg.max_message_bytes != self.max_message_bytes:
            diffs.append(f"max_message_bytes: published {self.max_message_bytes}, Config has {cfg.max_message_bytes}")
        if not (cfg.routes.strip() if isinstance(cfg.routes, str) else cfg.routes):
            cfg = replace(cfg, routes=dict(self.routes))
        else:
            assert cfg.routes is not None
            mine = _route_strings(cfg.routes)
            for name in sorted(set(mine) | set(self.routes)):
                a, b = self.routes.get(name), mine.get(name)
                if b is None:
                    diffs.append(f"route {name!r}: published ({a}), missing here")
                elif a is None:
                    diffs.append(f"route {name!r}: not published, given here ({b})")
                elif a != b:
                    diffs.append(f"route {name!r}: published {a}, here {b}")
        published_ordered = sorted(self.ordered)
        if cfg.ordered is None:
            cfg = replace(cfg, ordered=published_ordered)
        elif sorted(set(cfg.ordered)) != published_ordered:
            diffs.append(f"ordered: published {','.join(published_ordered) or 'none'}, Config has {','.join(sorted(set(cfg.ordered))) or 'none'}")
        if not cfg.lean:
            cfg = replace(cfg, lean=self.lean)
        elif not self.lean:
            diffs.append("lean: the dispatcher does not run lean, Config has lean")
        if diffs:
            raise ConfigError(Kind.PUBLISHED_MISMATCH, f"table {cfg.table}: differs from the dispatcher's published configuration: " + "; ".join(diffs))
        # The routes are the published ones now: a row of another route is
        # refused naming the table they were published in.
        object.__setattr__(cfg, "_published_in", cfg.table)
        object.__setattr__(cfg, "_published_routes", dict(self.routes))
        return cfg


def _route_strings(routes: Mapping[str, str] | str) -> dict[str, str]:
    parse_routes(routes)  # refuses what the producer would
    if not isinstance(routes, str):
        return dict(routes)
    out = {}
    for part in routes.split(","):
        if part.strip():
            name, _, raw = part.strip().partition("=")
            out[name.strip()] = raw.strip()
    return out


def _routes_from(config: Config) -> str:
    """Where config's routes came from, for a row of a route not in them:
    "given", or the table the dispatcher published them in (a Config
    Published.apply made, its routes unchanged)."""
    if config._published_in and config._published_routes is not None and config.routes is not None:
        if _route_strings(config.routes) == dict(config._published_routes):
            return f"the dispatcher published in table {config._published_in}"
    return "given"


def load_published(client: DynamoDBClient, table: str) -> Published:
    """Reads the dispatcher's published configuration from table with one
    strongly consistent GetItem. None published raises ConfigError
    (not_published); an item this reader cannot read, ConfigError
    (malformed). A failed read raises botocore's error as it is (so
    ``except client.exceptions.ResourceNotFoundException`` still catches
    it), its message naming the table: a table that does not exist reads
    ``table "x": not found in region R at endpoint E
    (ResourceNotFoundException)``, as Go's LoadPublished says it."""
    try:
        out = client.get_item(TableName=table, Key={_item.PK: {"S": _item.CONFIG_KEY}}, ConsistentRead=True)
    except ClientError as e:
        _name_table(client, table, e)
        raise
    item = out.get("Item")
    if not item:
        raise ConfigError(
            Kind.NOT_PUBLISHED,
            f"table {table}: no dispatcher configuration published (the sweep and wake functions publish it at their first invocation)",
        )
    return decode_published(table, item)


def _name_table(client: Any, table: str, error: ClientError) -> None:
    """Makes error's message name table, and for a table that does not
    exist the region and endpoint client looked for it in, where the
    client tells them (a boto3 client does)."""
    if str(error).startswith(f'table "{table}": '):
        return
    code = error.response.get("Error", {}).get("Code", "")
    if code == "ResourceNotFoundException":
        meta = getattr(client, "meta", None)
        region, endpoint = getattr(meta, "region_name", None), getattr(meta, "endpoint_url", None)
        where = (f" in region {region}" if region else "") + (f" at endpoint {endpoint}" if endpoint else "")
        error.args = (f'table "{table}": not found{where} ({code})',)
    else:
        error.args = (f'table "{table}": {error}',)


def decode_published(table: str, item: Mapping[str, Any]) -> Published:
    """The published configuration from its item."""
    problems: list[str] = []

    def num(name: str) -> int:
        v = item.get(name)
        if not isinstance(v, Mapping) or "N" not in v:
            problems.append(f"{name}: want a number")
            return 0
        try:
            return int(v["N"])
        except ValueError:
            problems.append(f"{name}: want a whole number, got {v['N']}")
            return 0

    def str_map(name: str) -> dict[str, str]:
        v = item.get(name)
        if not isinstance(v, Mapping) or not isinstance(v.get("M"), Mapping):
            problems.append(f"{name}: want a map of strings")
            return {}
        out = {}
        for k, e in v["M"].items():
            if not isinstance(e, Mapping) or "S" not in e:
                problems.append(f"{name}.{k}: want a string")
                continue
            out[k] = str(e["S"])
        return out

    def malformed(why: str) -> ConfigError:
        return ConfigError(Kind.MALFORMED, f"table {table}: item {_item.CONFIG_KEY!r}: {why}")

    fmt = num("format")
    if not problems and fmt != CONFIG_FORMAT:
        raise malformed(f"format {fmt}: this outflow reads format {CONFIG_FORMAT}; upgrade it")
    routes, ordered = str_map("routes"), str_map("ordered")
    shards, max_bytes = num("shards"), num("max_message_bytes")
    revision, published_at = num("revision"), num("published_at")
    by = item.get("published_by")
    wait = item.get("unsure_wait_ms")
    unsure_wait = None
    if isinstance(wait, Mapping) and "N" in wait:
        try:
            ms = int(wait["N"])
            if ms > 0:
                unsure_wait = timedelta(milliseconds=ms)
        except (ValueError, OverflowError):
            pass
    if problems:
        raise malformed("; ".join(problems))
    return Published(
        table=table,
        routes=routes,
        ordered=ordered,
        shards=shards,
        max_message_bytes=max_bytes,
        revision=revision,
        published_at=datetime.fromtimestamp(published_at / 1000, tz=timezone.utc),
        published_by=str(by["S"]) if isinstance(by, Mapping) and "S" in by else "",
        unsure_wait=unsure_wait,
        lean=_lean(item.get("lean")),
    )


def _lean(value: Any) -> bool:
    """Anything but a BOOL true is off: a producer that cannot tell stages
    rows in the due index, which every dispatcher delivers."""
    return isinstance(value, Mapping) and value.get("BOOL") is True
