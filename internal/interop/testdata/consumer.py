"""The interop test's Python consumer (internal/interop): the package's
receive loop, Inbox.poller, on the FIFO queue OUTFLOW_INTEROP_QUEUE_URL,
bound to an Inbox (table OUTFLOW_INTEROP_INBOX, consumer
OUTFLOW_INTEROP_CONSUMER, shared with the Go and TypeScript consumers) as
python/README.md shows: the effect returns the consumer's own writes, its
ledger item in OUTFLOW_INTEROP_LEDGER (which consumer applied the row, its
group and place, how many times: applies) and its group's log, and the
inbox commits them with its record of the row; a closing message goes to
the inbox's close by construction.

It prints {"ready": true} once it can receive, then one line per outcome
the poller reports (on_result): {"outcome", "key", "group", "seq",
"closed", "redriven", "error"}, printed before the poller deletes the
message; and when stdin closes (the test's signal to stop), it stops the
poller and prints {"done": true, "counts": {...}}. The test SIGKILLs it
at random points and starts another."""

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


def effect(ledger: str, m: consume.Message) -> list[consume.TransactItem]:
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
    retries = Config(retries={"max_attempts": 10, "mode": "standard"})
    db: Any = boto3.client("dynamodb", config=retries)
    sqs: Any = boto3.client("sqs", config=retries)
    inbox = consume.Inbox(db, os.environ["OUTFLOW_INTEROP_INBOX"], os.environ["OUTFLOW_INTEROP_CONSUMER"])
    counts = consume.Counts()

    def on_result(r: consume.Result) -> None:
        counts.add(r)
        m = r.message
        say(outcome=str(r.outcome), key=m.key if m else "", group=m.group if m else "", seq=m.seq if m else 0,
            closed=m.closed if m else "", redriven=m.redriven if m else False, error="" if r.error is None else f"{type(r.error).__name__}: {r.error}")

    poller = inbox.poller(sqs, url, lambda m: effect(ledger, m), visibility=int(os.environ["OUTFLOW_INTEROP_VISIBILITY"]), wait=1, on_result=on_result)

    def watch() -> None:
        sys.stdin.read()  # stdin closes: stop
        poller.stop()

    threading.Thread(target=watch, daemon=True).start()
    say(ready=True)
    poller.run()
    say(done=True, counts={o.value: counts.of(o) for o in consume.Outcome})
    return 0


if __name__ == "__main__":
    sys.exit(main())
