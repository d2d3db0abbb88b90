"""The interop test's Python producer (internal/interop): stages
OUTFLOW_INTEROP_ROWS rows into each of the OUTFLOW_INTEROP_GROUPS ordered
groups of route OUTFLOW_INTEROP_ROUTE, in the dispatcher's table
OUTFLOW_INTEROP_TABLE, each in one transaction with a write of its own to
OUTFLOW_INTEROP_SHOP, racing the Go and TypeScript producers for each
group's next place.

It prints one JSON line {"ready": true} once its producer has read the
published configuration, waits for the line "go" on stdin, stages, and
prints {"staged": [{"key", "group"}, ...] in its commit order, "races": n}.
AWS_ENDPOINT_URL, AWS_REGION and the credentials come from the environment."""

from __future__ import annotations

import json
import os
import random
import sys
import time
from typing import Any

import boto3
from botocore.config import Config

import outflowhq

LANG = "python"
TRIES = 500


def main() -> int:
    table, route, shop = os.environ["OUTFLOW_INTEROP_TABLE"], os.environ["OUTFLOW_INTEROP_ROUTE"], os.environ["OUTFLOW_INTEROP_SHOP"]
    groups = os.environ["OUTFLOW_INTEROP_GROUPS"].split(",")
    rows = int(os.environ["OUTFLOW_INTEROP_ROWS"])
    client: Any = boto3.client("dynamodb", config=Config(retries={"max_attempts": 10, "mode": "standard"}))
    producer = outflowhq.Producer.from_published(client, table)
    print(json.dumps({"ready": True}), flush=True)
    if sys.stdin.readline().strip() != "go":
        print("no go on stdin", file=sys.stderr)
        return 2

    staged: list[dict[str, str]] = []
    races = 0
    for i in range(rows):
        for group in groups:
            key = f"py-{group}-{i:03d}"
            row = outflowhq.Row(key=key, queue=route, group=group, payload=json.dumps({"lang": LANG, "group": group, "index": i}), attributes={"lang": LANG})
            # The business write the row is staged with, in one transaction.
            own = {"Put": {"TableName": shop, "Item": {"pk": {"S": key}, "lang": {"S": LANG}}}}
            for attempt in range(TRIES):
                try:
                    producer.transact([row], [own])
                    break
                except outflowhq.TransactError as e:
                    if e.has(outflowhq.Kind.ALREADY_STAGED):
                        break  # an earlier try committed; its answer was lost
                    if not e.retryable or attempt == TRIES - 1:
                        raise
                    races += e.has(outflowhq.Kind.GROUP_RACE)
                    time.sleep(random.uniform(0.001, 0.02))  # back off, then race again
            staged.append({"key": key, "group": group})
    print(json.dumps({"staged": staged, "races": races}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
