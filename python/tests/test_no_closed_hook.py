"""A consumer wired to the first recipe (an Inbox used inside apply, no
closed hook) meeting a closing message: never acknowledged unread in
silence, but reported failed, logged at ERROR and counted."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from outflowhq.consume import (
    METRIC_NO_CLOSED_HOOK,
    Handler,
    Message,
    NoClosedHookError,
    ack_closed,
    record_handler,
)


def _record(key: str, seq: int, closed: str = "") -> dict[str, Any]:
    attrs: dict[str, Any] = {
        "outflow.key": {"stringValue": key, "dataType": "String"},
        "outflow.attempt": {"stringValue": "1", "dataType": "Number"},
        "outflow.seq": {"stringValue": str(seq), "dataType": "Number"},
    }
    body = "{}"
    if closed:
        attrs["outflow.closed"] = {"stringValue": closed, "dataType": "String"}
        body = '{"outflow":"closed"}'
    return {
        "messageId": "id-" + key,
        "receiptHandle": "rh",
        "body": body,
        "attributes": {"MessageGroupId": "g"},
        "messageAttributes": attrs,
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:events.fifo",
    }


def test_a_closing_message_without_a_hook_fails_loudly(caplog: pytest.LogCaptureFixture) -> None:
    applied: list[str] = []
    reasons: list[BaseException] = []
    metrics: list[str] = []
    h = Handler(apply=lambda m: applied.append(m.key), on_failure=lambda _id, e: reasons.append(e), metrics=metrics.append)
    with caplog.at_level(logging.ERROR, logger="outflowhq.consume"):
        resp = h.handle({"Records": [_record("k1", 1), _record("k2", 2, "purged"), _record("k3", 3)]})
    assert resp == {"batchItemFailures": [{"itemIdentifier": "id-k2"}, {"itemIdentifier": "id-k3"}]}, "its group waits behind it"
    assert applied == ["k1"]
    assert isinstance(reasons[0], NoClosedHookError)
    assert "no closed hook" in caplog.text and "events.fifo" in caplog.text, "it is logged, naming the queue"
    doc = json.loads(metrics[0])
    assert doc[METRIC_NO_CLOSED_HOOK] == 1 and doc["Queue"] == "events.fifo", "and counted"


def test_ack_closed_acknowledges_a_closing_message_by_choice() -> None:
    h = Handler(apply=lambda m: None, closed=ack_closed)
    assert h.handle({"Records": [_record("k2", 2, "dead-letter")]}) == {"batchItemFailures": []}


def test_the_powertools_record_handler_raises_for_a_missing_hook(capsys: pytest.CaptureFixture[str]) -> None:
    handle = record_handler(lambda m: None)
    with pytest.raises(NoClosedHookError):
        handle(_record("k2", 2, "purged"))
    assert '"ClosingMessagesWithoutHook": 1' in capsys.readouterr().out, "the EMF line goes to standard output by default"
    seen: list[Message] = []
    record_handler(lambda m: None, closed=seen.append)(_record("k2", 2, "purged"))
    assert [m.key for m in seen] == ["k2"]


def test_the_record_handler_logs_and_counts_where_it_is_told() -> None:
    lines: list[str] = []
    logger = logging.getLogger("test.record_handler")
    handle = record_handler(lambda m: None, logger=logger, metrics=lines.append)
    with pytest.raises(NoClosedHookError):
        handle(_record("k2", 2, "purged"))
    assert json.loads(lines[0])["Queue"] == "events.fifo"
