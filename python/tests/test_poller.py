"""The Poller's own contract, beyond poller.json: what it asks SQS for,
visibility renewal while an effect runs long, stop() during a long poll,
SIGTERM, failed SQS calls, and a closing message with no closed hook; and
the inbox-bound Lambda handler counting one of each outcome. The live
tests run on the project's patched moto server. None asserts a duration:
each waits for a condition, with a deadline generous for a loaded
machine."""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest
from botocore.exceptions import ClientError

from conftest import create_queue, queue_counts
from outflowhq import consume
from test_consume_conformance import effect as scenario_effect
from test_poller_conformance import SCENARIOS, counted, effects, inbox_for, send

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

DEADLINE = 120.0


def eventually(cond: Callable[[], bool], what: str, deadline: float = DEADLINE) -> None:
    """Wait until cond() holds, failing with what after deadline seconds."""
    end = time.monotonic() + deadline
    while not cond():
        assert time.monotonic() < end, f"not within {deadline} s: {what}"
        time.sleep(0.05)


class Running:
    """A Poller's run() on a thread of its own."""

    def __init__(self, poller: consume.Poller) -> None:
        self.poller = poller
        self.raised: list[BaseException] = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.poller.run()
        except BaseException as e:
            self.raised.append(e)

    def stop(self) -> None:
        self.poller.stop()
        self.thread.join(DEADLINE)
        assert not self.thread.is_alive(), "run() did not return once stopped"
        assert not self.raised, self.raised


class Spy:
    """An SQS client that passes every call on to a real one, marks when a
    receive starts and ends, and fails the calls it is told to."""

    def __init__(self, sqs: Any) -> None:
        self.sqs = sqs
        self.receiving = threading.Event()
        self.received = threading.Event()
        self.fail: dict[str, int] = {}  # operation: how many calls to fail
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def _call(self, op: str, **kwargs: Any) -> Any:
        self.calls.append((op, kwargs))
        if self.fail.get(op, 0) > 0:
            self.fail[op] -= 1
            raise ClientError({"Error": {"Code": "InternalError", "Message": f"{op} failed (test)"}}, op)
        return getattr(self.sqs, op)(**kwargs)

    def receive_message(self, **kwargs: Any) -> Any:
        self.received.clear()
        self.receiving.set()
        try:
            return self._call("receive_message", **kwargs)
        finally:
            self.receiving.clear()
            self.received.set()

    def delete_message_batch(self, **kwargs: Any) -> Any:
        return self._call("delete_message_batch", **kwargs)

    def change_message_visibility_batch(self, **kwargs: Any) -> Any:
        return self._call("change_message_visibility_batch", **kwargs)


# Offline: the options and what a receive asks for.


class FakeSQS:
    """Answers every receive with no message, and records it."""

    def __init__(self) -> None:
        self.receives: list[dict[str, Any]] = []

    def receive_message(self, **kwargs: Any) -> Any:
        self.receives.append(kwargs)
        time.sleep(0.01)
        return {"Messages": []}


def test_a_receive_asks_for_what_decoding_needs_in_whole_seconds() -> None:
    fake = FakeSQS()
    p = consume.Poller(fake, "https://sqs.us-east-1.amazonaws.com/1/q.fifo", lambda m: None, visibility=1.5, wait=0.2)
    assert (p.visibility, p.wait) == (2, 1), "rounded up: a part of a second never becomes a short poll"
    r = Running(p)
    eventually(lambda: len(fake.receives) > 0, "a receive")
    r.stop()
    call = fake.receives[0]
    assert call == {
        "QueueUrl": "https://sqs.us-east-1.amazonaws.com/1/q.fifo",
        "MaxNumberOfMessages": 10,
        "WaitTimeSeconds": 1,
        "VisibilityTimeout": 2,
        "MessageAttributeNames": ["All"],
        "MessageSystemAttributeNames": ["MessageGroupId", "SequenceNumber"],
    }


def test_options_default_and_are_bounded() -> None:
    p = consume.Poller(FakeSQS(), "q", lambda m: None)
    assert (p.concurrency, p.visibility, p.wait) == (4, 30, 20)
    p = consume.Poller(FakeSQS(), "q", lambda m: None, concurrency=0, visibility=0, wait=0)
    assert (p.concurrency, p.visibility, p.wait) == (4, 30, 20), "0 means the default, as in Go"
    assert consume.Poller(FakeSQS(), "q", lambda m: None, wait=60).wait == 20, "SQS's longest long poll"
    assert consume.Poller(FakeSQS(), "q", lambda m: None, visibility=consume.MAX_VISIBILITY).visibility == consume.MAX_VISIBILITY
    with pytest.raises(ValueError, match="12 hours"):
        consume.Poller(FakeSQS(), "q", lambda m: None, visibility=consume.MAX_VISIBILITY + 0.5)
    with pytest.raises(ValueError):
        consume.Poller(FakeSQS(), "", lambda m: None)


def test_stop_before_run_returns_at_once() -> None:
    fake = FakeSQS()
    p = consume.Poller(fake, "q", lambda m: None)
    p.stop()
    p.run()
    assert fake.receives == [], "a stopped Poller stays stopped"


def test_handle_signals_needs_the_main_thread() -> None:
    p = consume.Poller(FakeSQS(), "q", lambda m: None)
    raised: list[BaseException] = []

    def run() -> None:
        try:
            p.run(handle_signals=True)
        except BaseException as e:
            raised.append(e)

    t = threading.Thread(target=run)
    t.start()
    t.join(DEADLINE)
    assert len(raised) == 1 and isinstance(raised[0], ValueError), raised


def test_counts_add_results() -> None:
    counts = consume.Counts()
    for o in consume.Outcome:
        counts.add(consume.Result("id-" + o.value, None, o, None))
    assert counts == consume.Counts(1, 1, 1, 1, 1, 1, 1) and counts.total == 7
    assert [o for o in consume.Outcome if o.done] == [consume.Outcome.APPLIED, consume.Outcome.CLOSED, consume.Outcome.DUPLICATE, consume.Outcome.LATE]


# Live.


def gated_effect(table: str) -> tuple[Callable[[consume.Message], list[dict[str, Any]]], threading.Event, threading.Event]:
    """An effect that sets its first event when it runs and returns its
    items once the second is set: a slow effect the test lets go."""
    started, release = threading.Event(), threading.Event()

    def effect(m: consume.Message) -> list[dict[str, Any]]:
        started.set()
        assert release.wait(DEADLINE)
        return [scenario_effect(table, m.key)]

    return effect, started, release


@pytest.mark.live
def test_visibility_is_renewed_while_a_slow_effect_runs(dynamodb: DynamoDBClient, sqs: Any, inbox_table: str) -> None:
    url = create_queue(sqs, fifo=False)
    try:
        send(sqs, url, False, {"key": "slow"})
        inbox = consume.Inbox(dynamodb, inbox_table, "c1")
        effect, running, finish = gated_effect(inbox_table)
        counts = consume.Counts()
        failures: list[tuple[str, BaseException]] = []
        p = inbox.poller(sqs, url, effect, visibility=2, wait=1, on_result=counts.add, on_failure=lambda i, e: failures.append((i, e)))
        r = Running(p)
        eventually(running.is_set, "the effect runs")
        # A second consumer polls for twice the visibility timeout (and at
        # least four receives) while the effect runs: a message whose
        # visibility was not renewed would be given to it.
        stolen: list[Any] = []
        started, polls = time.monotonic(), 0
        while time.monotonic() - started < 4 or polls < 4:
            out = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1, VisibilityTimeout=30)
            stolen.extend(out.get("Messages") or [])
            polls += 1
        finish.set()
        eventually(lambda: counts.total == 1, "the message's result")
        r.stop()
        assert stolen == [], "the message was given to a second consumer while it was applied"
        assert counts == consume.Counts(applied=1) and failures == []
        assert effects(dynamodb, inbox_table) == ["slow"]
        assert queue_counts(sqs, url) == (0, 0), "deleted once applied"
    finally:
        sqs.delete_queue(QueueUrl=url)


@pytest.mark.live
def test_stop_during_a_long_poll_returns_without_waiting_for_it(sqs: Any) -> None:
    url = create_queue(sqs, fifo=True)
    try:
        spy = Spy(sqs)
        p = consume.Poller(spy, url, lambda m: None, closed=consume.ack_closed, wait=20)
        answered_first: list[bool] = []

        def run() -> None:
            p.run()
            answered_first.append(spy.received.is_set())

        t = threading.Thread(target=run, daemon=True)
        t.start()
        eventually(spy.receiving.is_set, "a long poll")
        p.stop()
        t.join(DEADLINE)
        assert not t.is_alive()
        assert answered_first == [False], "run() returned before its 20-second long poll was answered"
    finally:
        sqs.delete_queue(QueueUrl=url)


@pytest.mark.live
def test_a_long_poll_abandoned_at_stop_gives_back_what_it_receives(sqs: Any) -> None:
    url = create_queue(sqs, fifo=False)
    try:
        spy = Spy(sqs)
        heard: list[consume.Result] = []
        applied: list[str] = []
        p = consume.Poller(spy, url, lambda m: applied.append(m.key), wait=20, on_result=heard.append)
        t = threading.Thread(target=p.run, daemon=True)
        t.start()
        eventually(spy.receiving.is_set, "a long poll")
        p.stop()
        t.join(DEADLINE)
        assert not t.is_alive()
        if spy.received.is_set():
            pytest.skip("the long poll was answered before the message was sent: nothing to give back")
        # A message for the poll still in flight: it is received, not
        # applied, and made visible again at once.
        send(sqs, url, False, {"key": "late-comer"})
        eventually(lambda: len(heard) == 1, "the abandoned poll's result")
        eventually(lambda: queue_counts(sqs, url) == (1, 0), "the message visible again")
        assert heard[0].outcome == consume.Outcome.SKIPPED and heard[0].message is not None and heard[0].message.key == "late-comer"
        assert applied == []
    finally:
        sqs.delete_queue(QueueUrl=url)


@pytest.mark.live
def test_sigterm_stops_run_which_finishes_the_message_it_started(dynamodb: DynamoDBClient, sqs: Any, inbox_table: str) -> None:
    assert threading.current_thread() is threading.main_thread(), "signal handlers are the main thread's"
    url = create_queue(sqs, fifo=True)
    before = signal.getsignal(signal.SIGTERM)
    try:
        send(sqs, url, True, {"key": "k1", "group": "g", "seq": 1})
        send(sqs, url, True, {"key": "k2", "group": "g", "seq": 2})
        inbox = consume.Inbox(dynamodb, inbox_table, "c1")
        effect, applying, go_on = gated_effect(inbox_table)
        counts = consume.Counts()
        p = inbox.poller(sqs, url, effect, wait=1, on_result=counts.add)
        sent: list[bool] = []

        def terminate() -> None:
            # SIGTERM only once run() has its handler in place: the default
            # one would end the test run.
            try:
                eventually(applying.is_set, "k1's effect runs")
                eventually(lambda: signal.getsignal(signal.SIGTERM) is not before, "run()'s SIGTERM handler")
                os.kill(os.getpid(), signal.SIGTERM)
                sent.append(True)
                eventually(lambda: p.stopping, "the handler calls stop()")
            finally:
                go_on.set()

        helper = threading.Thread(target=terminate, daemon=True)
        helper.start()
        p.run(handle_signals=True)
        helper.join(DEADLINE)
        assert sent == [True]
        assert signal.getsignal(signal.SIGTERM) is before, "the old handler is back"
        assert counts == consume.Counts(applied=1, skipped=1), "k1 finished, k2 not started"
        assert effects(dynamodb, inbox_table) == ["k1"]
        assert queue_counts(sqs, url) == (1, 0), "k1 deleted, k2 visible again at once"
    finally:
        signal.signal(signal.SIGTERM, before)
        sqs.delete_queue(QueueUrl=url)


@pytest.mark.live
def test_a_failed_receive_is_reported_and_retried(sqs: Any) -> None:
    url = create_queue(sqs, fifo=False)
    sqs.delete_queue(QueueUrl=url)  # every receive fails: no such queue
    failures: list[tuple[str, BaseException]] = []
    p = consume.Poller(sqs, url, lambda m: None, wait=1, on_failure=lambda i, e: failures.append((i, e)))
    r = Running(p)
    eventually(lambda: len(failures) >= 1, "a failed receive reported")
    r.stop()
    message_id, error = failures[0]
    assert message_id == "", "a failed call names no message"
    assert str(error).startswith("receive: ") and isinstance(error.__cause__, ClientError), error


@pytest.mark.live
def test_a_failed_delete_is_reported_and_the_copy_is_a_duplicate(dynamodb: DynamoDBClient, sqs: Any, inbox_table: str) -> None:
    url = create_queue(sqs, fifo=False)
    try:
        send(sqs, url, False, {"key": "k"})
        spy = Spy(sqs)
        spy.fail["delete_message_batch"] = 1
        failures: list[tuple[str, BaseException]] = []
        results: list[consume.Result] = []
        inbox = consume.Inbox(dynamodb, inbox_table, "c1")
        p = inbox.poller(spy, url, lambda m: [scenario_effect(inbox_table, m.key)], visibility=1, wait=1,
                         on_failure=lambda i, e: failures.append((i, e)), on_result=results.append)
        r = Running(p)
        # The message stays after the failed delete, comes again once its
        # visibility lapses, and is then a duplicate, which is deleted.
        eventually(lambda: len(results) >= 2, "the message received again")
        eventually(lambda: queue_counts(sqs, url) == (0, 0), "the copy deleted")
        r.stop()
        assert [x.outcome for x in results[:2]] == [consume.Outcome.APPLIED, consume.Outcome.DUPLICATE]
        assert [(i, str(e)) for i, e in failures][:1] == [("", "delete: An error occurred (InternalError) when calling the delete_message_batch operation: delete_message_batch failed (test)")]
        assert effects(dynamodb, inbox_table) == ["k"], "applied once"
    finally:
        sqs.delete_queue(QueueUrl=url)


@pytest.mark.live
def test_a_closing_message_without_a_closed_hook_fails_loudly(sqs: Any, caplog: pytest.LogCaptureFixture) -> None:
    """A loose Poller (apply only) wired as the first recipe was: the
    closing message is failed, logged and counted, never deleted unread,
    and its group's later message waits behind it."""
    url = create_queue(sqs, fifo=True)
    try:
        send(sqs, url, True, {"key": "a", "group": "g", "seq": 1})
        send(sqs, url, True, {"key": "b", "group": "g", "seq": 2, "closed": "purged"})
        send(sqs, url, True, {"key": "c", "group": "g", "seq": 3})
        applied: list[str] = []
        failures: list[tuple[str, BaseException]] = []
        lines: list[str] = []
        counts = consume.Counts()
        p = consume.Poller(sqs, url, lambda m: applied.append(m.key), wait=1, on_result=counts.add,
                           on_failure=lambda i, e: failures.append((i, e)), metrics=lines.append)
        with caplog.at_level(logging.ERROR, logger="outflowhq.consume"):
            r = Running(p)
            eventually(lambda: counts.total >= 3, "three results")
            r.stop()
        assert applied == ["a"]
        assert counts == consume.Counts(applied=1, failed=1, skipped=1)
        assert len(failures) == 1 and isinstance(failures[0][1], consume.NoClosedHookError)
        assert "no closed hook" in caplog.text
        queue = url.rsplit("/", 1)[-1]
        doc = json.loads(lines[0])
        assert doc[consume.METRIC_NO_CLOSED_HOOK] == 1 and doc["Queue"] == queue
        assert queue_counts(sqs, url) == (1, 1), "b left to its visibility timeout, c visible again"
    finally:
        sqs.delete_queue(QueueUrl=url)


@pytest.mark.live
def test_a_hook_that_raises_neither_stops_the_loop_nor_keeps_a_message(sqs: Any, caplog: pytest.LogCaptureFixture) -> None:
    url = create_queue(sqs, fifo=False)
    try:
        send(sqs, url, False, {"key": "k"})
        heard: list[consume.Result] = []

        def on_result(r: consume.Result) -> None:
            heard.append(r)
            raise RuntimeError("a bug in the hook")

        p = consume.Poller(sqs, url, lambda m: None, wait=1, on_result=on_result)
        with caplog.at_level(logging.ERROR, logger="outflowhq.consume"):
            r = Running(p)
            eventually(lambda: len(heard) == 1 and queue_counts(sqs, url) == (0, 0), "the message applied and deleted")
            r.stop()
        assert heard[0].outcome == consume.Outcome.APPLIED
        assert "a hook raised" in caplog.text
    finally:
        sqs.delete_queue(QueueUrl=url)


@pytest.mark.live
def test_the_inbox_handler_counts_one_of_each_outcome(dynamodb: DynamoDBClient, inbox_table: str) -> None:
    """poller.json's batch of one of each outcome, as Lambda gives it to
    the Handler Inbox.handler makes: the same counts, through Counts and
    in the batch's EMF line."""
    sc = next(s for s in SCENARIOS if s["name"] == "one-of-each-outcome")
    inbox = inbox_for(dynamodb, inbox_table, sc["config"])
    for b in sc["before"]:
        inbox.apply(consume.Message(key=b["key"], group=b["group"], seq=b["seq"], attempt=1), [scenario_effect(inbox_table, b["key"])])

    def effect(m: consume.Message) -> list[dict[str, Any]]:
        if m.key in sc["fail"]:
            raise RuntimeError("the effect failed")
        return [scenario_effect(inbox_table, m.key)]

    counts = consume.Counts()
    lines: list[str] = []
    handler = inbox.handler(effect, on_result=counts.add, metrics=lines.append)
    records = [lambda_record(m) for m in sc["send"]]
    resp = handler.handle({"Records": records})
    assert counted(counts) == sc["want"]["outcomes"]
    assert len(resp["batchItemFailures"]) == counts.gap + counts.failed + counts.skipped
    (line,) = [json.loads(x) for x in lines]
    assert {o.value: line[o.metric] for o in consume.Outcome if line[o.metric]} == sc["want"]["outcomes"]
    assert line["Queue"] == "orders.fifo"
    assert effects(dynamodb, inbox_table) == sc["want"]["effects"]


def lambda_record(m: dict[str, Any]) -> dict[str, Any]:
    """A Lambda SQS record of m, as Outflow sends it to a FIFO queue."""
    attrs = {"outflow.key": {"stringValue": m["key"], "dataType": "String"}, "outflow.attempt": {"stringValue": "1", "dataType": "Number"}}
    if m.get("seq"):
        attrs["outflow.seq"] = {"stringValue": str(m["seq"]), "dataType": "Number"}
    if m.get("closed"):
        attrs["outflow.closed"] = {"stringValue": m["closed"], "dataType": "String"}
    return {
        "messageId": "id-" + m["key"],
        "receiptHandle": "rh-" + m["key"],
        "body": json.dumps({"key": m["key"]}),
        "attributes": {"MessageGroupId": m["group"]},
        "messageAttributes": attrs,
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:000000000000:orders.fifo",
    }
