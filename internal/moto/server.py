"""Runs the moto server with atomic DynamoDB item writes.

moto evaluates a write's condition and applies the write without a lock,
and its server is threaded, so two concurrent conditional writes to one item
can both succeed. DynamoDB never lets that happen, and Outflow's claims rely
on it. This wraps moto's item writes in one lock, then starts the server
exactly as moto_server does (same arguments). It also makes an update
that fails part way leave the item as it was, as DynamoDB does.
"""
import copy
import functools
import sys
import threading

from moto import server
from moto.dynamodb.models import DynamoDBBackend

_lock = threading.RLock()


def _atomic(fn):
    @functools.wraps(fn)
    def locked(*args, **kwargs):
        with _lock:
            return fn(*args, **kwargs)

    return locked


def _all_or_nothing(fn):
    """moto applies an update expression action by action to the stored
    item, and when one takes it past the size limit it raises with the
    earlier actions kept: a claim refused for size left the item claimed
    with no lease. DynamoDB applies all of an update or none; so does this,
    by putting the item's attributes back when the update raises."""

    @functools.wraps(fn)
    def update(self, table_name, key, *args, **kwargs):
        item, saved = None, None
        try:
            table = self.get_table(table_name)
            hash_value, range_value = self.get_keys_value(table, key)
            item = table.get_item(hash_value, range_value)
            saved = copy.deepcopy(item.attrs) if item is not None else None
        except Exception:  # the call itself reports a bad table or key
            item = None
        try:
            return fn(self, table_name, key, *args, **kwargs)
        except Exception:
            if item is not None:
                item.attrs = saved
            raise

    return update


DynamoDBBackend.update_item = _all_or_nothing(DynamoDBBackend.update_item)
for _name in ("put_item", "update_item", "delete_item", "transact_write_items"):
    setattr(DynamoDBBackend, _name, _atomic(getattr(DynamoDBBackend, _name)))

server.main(sys.argv[1:])
