"""Runs the moto server with atomic DynamoDB item writes.

moto evaluates a write's condition and applies the write without a lock,
and its server is threaded, so two concurrent conditional writes to one item
can both succeed. DynamoDB never lets that happen, and Outflow's claims rely
on it. This wraps moto's item writes in one lock, then starts the server
exactly as moto_server does (same arguments).
"""
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


for _name in ("put_item", "update_item", "delete_item", "transact_write_items"):
    setattr(DynamoDBBackend, _name, _atomic(getattr(DynamoDBBackend, _name)))

server.main(sys.argv[1:])
