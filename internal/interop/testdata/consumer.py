"""The interop test's Python consumer (internal/interop): a receive loop
on the FIFO queue OUTFLOW_INTEROP_QUEUE_URL, as python/README.md says to
write one, that applies each message with an Inbox (table
OUTFLOW_INTEROP_INBOX, consumer OUTFLOW_INTEROP_CONSUMER, shared with the
TypeScript consumer) whose effect, in the same transaction, records the
row in the ledger table OUTFLOW_INTEROP_LEDGER: which consumer applied it,
its group and place, how many times (applies), and its group's log.

It prints {"ready": true} once it can receive, a line {"applied": key,
"group": g, "seq": n} for each effect committed, and when stdin closes,
{"done": true, "counts": {...}, "errors": [the first few]}."""

from __future__ import annotations

import json
import os
import sys
import threading
from typing import Any

import boto3
from botocore.config import Config

from outflowhq import consume

LANG = "python"


def effect(ledger: str, m: consume.Message) -> list[dict[str, Any]]:
    """The consumer's own writes for m: its ledger item, and its group's log."""
    return [
        {
            "Update": {
                "TableName": ledger,
                "Key": {"pk": {"S": f"applied {m.key}"}},
                "UpdateExpression": "SET #key = :key, #group = :group, #seq = :seq, #by = :by ADD #applies :one",
                "ExpressionAttributeNames": {"#key": "key", "#group": "group", "#seq": "seq", "#by": "consumer", "#applies": "applies"},
                "ExpressionAttributeValues": {
                    ":key": {"S": m.key},
                    ":group": {"S": m.group},
                    ":seq": {"N": str(m.seq)},
                    ":by": {"S": LANG},
                    ":one": {"N": "1"},
                },
            }
        },
        {
            "Update": {
                "TableName": ledger,
                "Key": {"pk": {"S": f"log {m.group}"}},
                "UpdateExpression": "SET #log = list_append(if_not_exists(#log, :empty), :key)",
                "ExpressionAttributeNames": {"#log": "log"},
                "ExpressionAttributeValues": {":empty": {"L": []}, ":key": {"L": [{"S": m.key}]}},
            }
        },
    ]


def say(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def main() -> int:
    url, ledger = os.environ["OUTFLOW_INTEROP_QUEUE_URL"], os.environ["OUTFLOW_INTEROP_LEDGER"]
    batch, visibility = int(os.environ["OUTFLOW_INTEROP_BATCH"]), int(os.environ["OUTFLOW_INTEROP_VISIBILITY"])
    retries = Config(retries={"max_attempts": 10, "mode": "standard"})
    db: Any = boto3.client("dynamodb", config=retries)
    sqs: Any = boto3.client("sqs", config=retries)
    inbox = consume.Inbox(db, os.environ["OUTFLOW_INTEROP_INBOX"], os.environ["OUTFLOW_INTEROP_CONSUMER"])

    stop = threading.Event()

    def watch() -> None:
        sys.stdin.read()  # stdin closes: stop
        stop.set()

    threading.Thread(target=watch, daemon=True).start()
    counts = {"applied": 0, "duplicates": 0, "late": 0, "left": 0, "delete_failures": 0}
    errors: list[str] = []
    say(ready=True)
    while not stop.is_set():
        out = sqs.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=batch,
            WaitTimeSeconds=1,
            VisibilityTimeout=visibility,
            MessageAttributeNames=["All"],
            MessageSystemAttributeNames=["MessageGroupId"],
        )
        done: list[dict[str, str]] = []
        failed_groups: set[str] = set()
        for i, raw in enumerate(out.get("Messages", [])):
            group = raw.get("Attributes", {}).get("MessageGroupId", "")
            if group in failed_groups:
                counts["left"] += 1  # after a failure of its group in this batch: it comes back, in order
                continue
            try:
                m = consume.from_queue(url, raw)
                if m.closed:
                    inbox.close(m)
                else:
                    inbox.apply(m, effect(ledger, m))
                    say(applied=m.key, group=m.group, seq=m.seq)
                    counts["applied"] += 1
            except consume.DuplicateError:
                counts["duplicates"] += 1
            except consume.LateError:
                counts["late"] += 1
            except Exception as e:  # OrderError and anything else: leave it, and its group's later messages
                counts["left"] += 1
                failed_groups.add(group)
                if len(errors) < 20:
                    errors.append(f"{type(e).__name__}: {e}")
                continue
            done.append({"Id": str(i), "ReceiptHandle": raw["ReceiptHandle"]})
        if done:
            res = sqs.delete_message_batch(QueueUrl=url, Entries=done)
            counts["delete_failures"] += len(res.get("Failed", []))
    say(done=True, counts=counts, errors=errors)
    return 0


if __name__ == "__main__":
    sys.exit(main())
