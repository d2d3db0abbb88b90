"""Stage outbox rows for the Outflow dispatcher from Python.

Build a Row, then either ``Producer.put`` it on its own, or add
``producer.transact_item(row)`` to the TransactWriteItems that writes your
business data, so the message is sent if and only if your write commits::

    producer = Producer.from_published(boto3.client("dynamodb"), "outbox")
    item = producer.transact_item(Row(queue="orders", payload=body))
    try:
        client.transact_write_items(TransactItems=[order_put, item])
    except ClientError as e:
        raise producer.classify(e, [order_put, item]) from e

Every row is checked against what its route's target accepts, with the
same rules, and the same error kinds, as the Go package
github.com/outflowhq/outflow.

The consumer's half (decode, Inbox, Idempotency, a Lambda Handler) is
``outflowhq.consume``, as Go's github.com/outflowhq/outflow/consume.
"""

from importlib.metadata import PackageNotFoundError, version as _version

from . import consume

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
from .producer import MAX_TRANSACT_ITEMS, Producer, TransactWriteItem
from .published import Config, DynamoDBClient, Published, decode_published, load_published
from .row import MAX_ORDERED_ATTRIBUTES, MAX_OWN_ATTRIBUTES, Row
from ._trace import current_trace_parent

try:
    #: The installed distribution's version (outflowhq's, from its metadata).
    __version__: str = _version("outflowhq")
except PackageNotFoundError:  # imported from a source tree that is not installed
    __version__ = "0+unknown"

__all__ = [
    "MAX_ORDERED_ATTRIBUTES",
    "MAX_OWN_ATTRIBUTES",
    "MAX_TRANSACT_ITEMS",
    "Config",
    "ConfigError",
    "DynamoDBClient",
    "InvalidRowError",
    "ItemError",
    "Kind",
    "OutflowError",
    "Producer",
    "Published",
    "PutError",
    "Row",
    "StagingError",
    "TransactError",
    "TransactWriteItem",
    "consume",
    "current_trace_parent",
    "decode_published",
    "load_published",
]
