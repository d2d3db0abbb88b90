"""A receive loop for a long-running consumer (Go's consume.Poller): it
long-polls an SQS queue, applies each batch's FIFO groups concurrently and
each group's messages one at a time in order, keeps the batch invisible
while it applies, deletes what is done in one request, and on stop()
finishes what it started and gives the rest back to the queue at once."""

from __future__ import annotations

import logging
import math
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for
from dataclasses import dataclass, field
from datetime import timedelta
from types import FrameType
from typing import Any

from ._decode import GROUP_ATTRIBUTE, from_queue
from ._handler import ApplyFunc, ResultHook, _queue_name, loud, run_message
from ._message import ConsumeError, Message, SkippedError
from ._outcome import Outcome, Result, outcome_of

#: The longest visibility timeout SQS takes, in seconds (12 hours).
MAX_VISIBILITY = 12 * 3600
#: The longest long poll SQS takes, in seconds.
MAX_WAIT = 20
#: How often run() looks at its stop flag while it waits for a receive or
#: a back-off, in seconds: stop() wakes it at once, and this only bounds
#: the wait when a signal handler's stop() lands between run()'s look at
#: the flag and its wait (a wake-up that no lock can make safe from a
#: signal handler).
_SLICE = 0.25

_log = logging.getLogger("outflowhq.consume")

FailureHook = Callable[[str, BaseException], None]
RawMessage = Mapping[str, Any]


def _whole_seconds(d: float | timedelta) -> int:
    """d rounded up to whole seconds, the unit SQS takes a wait and a
    visibility timeout in: truncated, a sub-second wait would be a short
    poll (a loop spinning on an empty queue), and a visibility of 1.5 s
    would be sent as 1 s while it is renewed every 0.5 s."""
    seconds = d.total_seconds() if isinstance(d, timedelta) else float(d)
    return math.ceil(seconds)


@dataclass
class _Receive:
    """One ReceiveMessage call, made on a thread of its own so that run()
    can stop waiting for it; guarded by the Poller's condition."""

    done: bool = False
    abandoned: bool = False
    messages: list[RawMessage] = field(default_factory=list)
    error: BaseException | None = None


class Poller:
    """Consumes an SQS queue from a long-running process (a container),
    with Go's consume.Poller's contract.

    ``run()`` long-polls (at most 10 messages a receive, ``wait`` seconds,
    asking for every message attribute and the MessageGroupId system
    attribute), applies each batch's groups at most ``concurrency`` at a
    time, on threads, and each group's messages one at a time in order,
    renews the batch's visibility every third of ``visibility`` while it
    applies, and deletes the messages done (applied, closed, duplicates,
    late) in one request. Whether the queue keeps an order is its URL's to
    say (a name ending in .fifo): a standard queue's message is a group of
    its own, as is a fair queue's, whose group id holds no order.

    A message that fails (or is not its group's turn: a gap) is left to be
    received again once its visibility timeout lapses, which spaces out its
    retries; on a FIFO queue the later messages of its group in the batch
    are not started and are made visible again at once, and SQS gives them
    only after it.

    ``stop()``, from another thread, a signal handler or a hook, makes
    ``run()`` stop receiving, finish the messages it started, delete those
    done, make the ones received but not started visible again at once, and
    return. ``run(handle_signals=True)`` calls stop() on SIGTERM or SIGINT.
    ``Inbox.poller(sqs, queue_url, effect)`` makes one wired to an Inbox.
    """

    def __init__(
        self,
        sqs: Any,
        queue_url: str,
        apply: ApplyFunc,
        closed: ApplyFunc | None = None,
        *,
        concurrency: int = 4,
        visibility: float | timedelta = 30,
        wait: float | timedelta = 20,
        on_failure: FailureHook | None = None,
        on_result: ResultHook | None = None,
        logger: logging.Logger | None = None,
        metrics: Callable[[str], None] | None = None,
    ) -> None:
        """sqs is a boto3 SQS client (thread-safe: the groups of a batch
        share it). apply and closed are as Handler's: apply is given each
        message and returns (or raises DuplicateError or LateError) when
        it is done; closed is given the messages that close a place (an
        Inbox's close, or ack_closed for a consumer that keeps no order),
        and without it such a message fails loudly (NoClosedHookError,
        logged at ERROR on logger and counted as an EMF line on metrics),
        never acknowledged unread. concurrency bounds the groups applied
        at once (a standard queue's messages); 0 means 4. visibility is
        the visibility timeout asked for each message, renewed every third
        of it while its batch applies; wait the long poll's wait, at most
        20; both in seconds (or a timedelta), rounded up to whole seconds
        as SQS takes them, 0 meaning 30 and 20. on_failure is told of each
        message started and not done and why, and of each failed SQS call
        or batch entry (message id "" for a call); on_result of what
        became of each message received (Result), once per delivery. The
        hooks are called one at a time, never concurrently; what one raises
        is logged at ERROR and goes no further, so that a hook's bug
        neither stops the loop nor keeps a message that is done from being
        deleted."""
        if sqs is None or not queue_url or apply is None:
            raise ValueError("poller: sqs, queue_url and apply are required")
        v = _whole_seconds(visibility)
        if v > MAX_VISIBILITY:
            # SQS would refuse every receive, and the loop would only report it.
            raise ValueError(f"poller: visibility {v} s is over SQS's most, {MAX_VISIBILITY} s (12 hours)")
        w = _whole_seconds(wait)
        self.sqs, self.queue_url, self.apply, self.closed = sqs, queue_url, apply, closed
        self.concurrency = concurrency if concurrency > 0 else 4
        self.visibility = max(v, 1) if v > 0 else 30
        self.wait = min(w, MAX_WAIT) if w > 0 else MAX_WAIT
        self.on_failure, self.on_result = on_failure, on_result
        self.logger, self.metrics = logger, metrics
        self._fifo = queue_url.endswith(".fifo")
        self._queue = _queue_name(queue_url)
        # An RLock: stop() may run in a signal handler on a thread that
        # holds it already (run()'s own), where a plain lock would deadlock.
        self._cond = threading.Condition(threading.RLock())
        self._stopping = False
        self._running = False
        # The hooks are the user's: one call at a time, from any thread.
        self._hooks = threading.Lock()

    # Stopping.

    def stop(self) -> None:
        """Ask run() to return: it starts no more messages, finishes the
        ones it started, deletes those done, makes the rest visible again
        at once, and returns. Safe from any thread, a signal handler or a
        hook, and before run(); a stopped Poller stays stopped."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()

    @property
    def stopping(self) -> bool:
        """Whether stop() was called."""
        return self._stopping

    def _wait(self, until: Callable[[], bool], seconds: float | None = None) -> None:
        """Wait, holding self._cond, until until() holds, stop() is called
        or seconds pass (None: no limit)."""
        end = None if seconds is None else time.monotonic() + seconds
        while not until() and not self._stopping:
            left = _SLICE if end is None else min(_SLICE, end - time.monotonic())
            if left <= 0:
                return
            self._cond.wait(left)

    # The loop.

    def run(self, handle_signals: bool = False) -> None:
        """Poll until stop() is called, then finish the messages started,
        delete those done, make the received ones not started visible
        again at once, and return.

        With handle_signals, SIGTERM (a container stopped) and SIGINT
        (Ctrl-C) call stop() while run() runs; after the first, a second
        does what it did before run() (SIGINT: KeyboardInterrupt), for a
        stop that takes too long. The old handlers are back when run()
        returns. Signal handlers can only be set on the main thread: off
        it, handle_signals raises ValueError, and stop() is yours to call.

        A long poll in flight when stop() is called is not waited for:
        run() returns at once, and the receive, when SQS answers (within
        wait seconds), makes whatever it was given visible again at once
        (reported skipped to on_result), unless the process has exited by
        then, in which case those messages come back when their visibility
        timeout lapses, as after a crash: none is lost or applied twice."""
        with self._cond:
            if self._running:
                raise RuntimeError("poller: run() is running already")
            self._running = True
        try:
            restore = self._handle_signals() if handle_signals else None
            pool = ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="outflowhq-poller")
            try:
                self._loop(pool)
            finally:
                # However run() ends, the groups stop starting messages.
                self.stop()
                pool.shutdown(wait=True)
                if restore is not None:
                    restore()
        finally:
            with self._cond:
                self._running = False

    def _handle_signals(self) -> Callable[[], None]:
        """Install SIGTERM and SIGINT handlers that call stop(); return
        what puts the old ones back."""
        if threading.current_thread() is not threading.main_thread():
            raise ValueError("poller: handle_signals needs the main thread: call stop() from your own signal handling")
        old: dict[int, Any] = {}

        def restore() -> None:
            for signum, handler in old.items():
                if signal.getsignal(signum) is on_signal:  # not one the user set since
                    signal.signal(signum, handler if handler is not None else signal.SIG_DFL)

        def on_signal(signum: int, frame: FrameType | None) -> None:
            restore()
            self.stop()

        for signum in (signal.SIGTERM, signal.SIGINT):
            old[signum] = signal.signal(signum, on_signal)
        return restore

    def _loop(self, pool: ThreadPoolExecutor) -> None:
        failures = 0
        while not self._stopping:
            try:
                messages = self._receive()
            except Exception as e:
                if self._stopping:
                    break
                self._failed("", _call_error("receive", e))
                failures += 1
                with self._cond:
                    self._wait(lambda: False, min(failures, 6))
                continue
            if messages is None:  # stopped mid-poll
                break
            failures = 0
            self._batch(pool, messages)

    def _receive(self) -> list[RawMessage] | None:
        """One long poll's messages; None if stop() came first. The
        receive runs on a thread of its own, so that stop() need not wait
        for SQS to answer it: one in flight is abandoned, and gives back
        at once what it receives."""
        call = _Receive()
        threading.Thread(target=self._poll, args=(call,), name="outflowhq-poller-receive", daemon=True).start()
        with self._cond:
            try:
                self._wait(lambda: call.done)
            finally:
                # Stopped, or interrupted (Ctrl-C without handle_signals):
                # the poll gives back what it receives.
                call.abandoned = not call.done
            if call.abandoned:
                return None
        if call.error is not None:
            raise call.error
        return call.messages

    def _poll(self, call: _Receive) -> None:
        messages: list[RawMessage] = []
        error: BaseException | None = None
        try:
            out = self.sqs.receive_message(
                QueueUrl=self.queue_url,
                MaxNumberOfMessages=10,
                WaitTimeSeconds=self.wait,
                VisibilityTimeout=self.visibility,
                MessageAttributeNames=["All"],
                MessageSystemAttributeNames=[GROUP_ATTRIBUTE, "SequenceNumber"],
            )
            messages = list(out.get("Messages") or [])
        except BaseException as e:
            error = e
        with self._cond:
            call.messages, call.error, call.done = messages, error, True
            abandoned = call.abandoned
            self._cond.notify_all()
        if abandoned and messages:
            self._set_visibility(messages, 0, "release")
            for raw in messages:
                self._report(self._skipped(raw, "not applied: the poller was stopped first"), started=False)

    # A batch.

    def _batch(self, pool: ThreadPoolExecutor, messages: Sequence[RawMessage]) -> None:
        """Apply one receive's messages: a group's in order, the groups at
        most concurrency at once. Once stop() is called no message is
        started; the ones started are finished, and deleted, regardless."""
        if not messages:
            return
        groups: list[list[RawMessage]] = []
        index: dict[object, int] = {}
        for i, raw in enumerate(messages):
            group = (raw.get("Attributes") or {}).get(GROUP_ATTRIBUTE)
            key: object = group if self._fifo and isinstance(group, str) else (i,)
            if key in index:
                groups[index[key]].append(raw)
            else:
                index[key] = len(groups)
                groups.append([raw])
        lock = threading.Lock()
        done: list[RawMessage] = []
        unstarted: list[RawMessage] = []
        halt = self._extend(messages)
        futures: list[Future[None]] = []
        try:
            futures = [pool.submit(self._group, group, lock, done, unstarted) for group in groups]
            wait_for(futures)
        finally:
            halt()
            self._delete(done)
            self._release(unstarted)
        for f in futures:
            f.result()  # what an apply raised that is no Exception (SystemExit, say) ends run()

    def _group(self, group: list[RawMessage], lock: threading.Lock, done: list[RawMessage], unstarted: list[RawMessage]) -> None:
        """Apply one group's messages in order, until one is not done."""
        for i, raw in enumerate(group):
            if self._stopping:
                self._leave(group[i:], "not applied: the poller was stopped first", lock, unstarted)
                return
            result = self._apply(raw)
            self._report(result, started=True)
            if not result.outcome.done:
                # The group's later messages wait for this one.
                self._leave(group[i + 1:], "not applied: an earlier message of its group failed", lock, unstarted)
                return
            with lock:
                done.append(raw)

    def _leave(self, rest: list[RawMessage], why: str, lock: threading.Lock, unstarted: list[RawMessage]) -> None:
        """Report messages not started as skipped, to be made visible again."""
        for raw in rest:
            self._report(self._skipped(raw, why), started=False)
        with lock:
            unstarted.extend(rest)

    def _apply(self, raw: RawMessage) -> Result:
        """Decode one message and give it to its hook."""
        message_id = str(raw.get("MessageId", ""))
        message: Message | None = None
        error: BaseException | None
        try:
            message = from_queue(self.queue_url, raw)
        except Exception as e:
            error = e
        else:
            error = run_message(message, self.apply, self.closed)
        return Result(message_id, message, outcome_of(message, error), error)

    def _skipped(self, raw: RawMessage, why: str) -> Result:
        message: Message | None
        try:
            message = from_queue(self.queue_url, raw)
        except Exception:
            message = None
        return Result(str(raw.get("MessageId", "")), message, Outcome.SKIPPED, SkippedError(why))

    # The hooks.

    def _report(self, result: Result, started: bool) -> None:
        """Tell on_failure of a message started and not done, and
        on_result of every message, one call at a time."""
        with self._hooks:
            if started and not result.outcome.done and result.error is not None:
                self._failed_locked(result.message_id, result.error)
            if self.on_result is not None:
                self._call(self.on_result, result)

    def _failed(self, message_id: str, error: BaseException) -> None:
        with self._hooks:
            self._failed_locked(message_id, error)

    def _failed_locked(self, message_id: str, error: BaseException) -> None:
        self._call(loud, error, self._queue, message_id, self.logger, self.metrics)  # metrics is the user's too
        if self.on_failure is not None:
            self._call(self.on_failure, message_id, error)

    def _call(self, hook: Callable[..., None], *args: Any) -> None:
        """Call a user's hook: what it raises is logged, not raised, so
        that a hook's bug neither stops the loop nor keeps a message that
        is done from being deleted."""
        try:
            hook(*args)
        except Exception:
            (self.logger or _log).exception("poller: a hook raised (queue=%s)", self._queue)

    # SQS calls.

    def _extend(self, messages: Sequence[RawMessage]) -> Callable[[], None]:
        """Renew the messages' visibility every third of it until the
        returned function is called (which waits for a renewal in flight)."""
        halt = threading.Event()

        def renew() -> None:
            while not halt.wait(self.visibility / 3):
                self._set_visibility(messages, self.visibility, "extend visibility", quiet=halt.is_set)

        t = threading.Thread(target=renew, name="outflowhq-poller-visibility", daemon=True)
        t.start()

        def stop() -> None:
            halt.set()
            t.join()

        return stop

    def _release(self, messages: Sequence[RawMessage]) -> None:
        """Make messages that were not started (behind their group's
        failure, or at stop) visible at once, for this or another consumer
        to take. The message that failed is left to its visibility
        timeout, which spaces out its retries; on a FIFO queue SQS gives
        its group's later messages only after it."""
        if messages:
            self._set_visibility(messages, 0, "release")

    def _set_visibility(self, messages: Sequence[RawMessage], seconds: int, op: str,
                        quiet: Callable[[], bool] = lambda: False) -> None:
        """Set the messages' visibility timeout in one request (a receive
        gives at most 10); a failure is reported unless quiet() says the
        renewal is no longer wanted."""
        entries = [{"Id": str(i), "ReceiptHandle": m.get("ReceiptHandle", ""), "VisibilityTimeout": seconds} for i, m in enumerate(messages)]
        try:
            out = self.sqs.change_message_visibility_batch(QueueUrl=self.queue_url, Entries=entries)
        except Exception as e:
            if not quiet():
                self._failed("", _call_error(op, e))
            return
        self._entries_failed(messages, out.get("Failed") or [], op)

    def _delete(self, messages: Sequence[RawMessage]) -> None:
        """Delete the messages done in one request. One whose delete
        fails is received again, and its apply then finds it done."""
        if not messages:
            return
        entries = [{"Id": str(i), "ReceiptHandle": m.get("ReceiptHandle", "")} for i, m in enumerate(messages)]
        try:
            out = self.sqs.delete_message_batch(QueueUrl=self.queue_url, Entries=entries)
        except Exception as e:
            self._failed("", _call_error("delete", e))
            return
        self._entries_failed(messages, out.get("Failed") or [], "delete")

    def _entries_failed(self, messages: Sequence[RawMessage], failed: Sequence[Mapping[str, Any]], op: str) -> None:
        """Report the entries of a batch request that failed."""
        for f in failed:
            try:
                i = int(f.get("Id", ""))
            except ValueError:
                continue
            if 0 <= i < len(messages):
                self._failed(str(messages[i].get("MessageId", "")), ConsumeError(f"{op}: {f.get('Code', '')}: {f.get('Message', '')}"))


def _call_error(op: str, error: BaseException) -> ConsumeError:
    """A failed SQS call, for on_failure: the operation, caused by what
    boto3 raised."""
    e = ConsumeError(f"{op}: {error}")
    e.__cause__ = error
    return e
