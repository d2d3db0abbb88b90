"""Runs the moto server with atomic DynamoDB item writes.

moto evaluates a write's condition and applies the write without a lock,
and its server is threaded, so two concurrent conditional writes to one item
can both succeed. DynamoDB never lets that happen, and Outflow's claims rely
on it. This wraps moto's item writes in one lock, then starts the server
exactly as moto_server does (same arguments). A GetItem takes the same
lock, so it never sees a write half done. It also makes an update
that fails part way leave the item as it was, as DynamoDB does, refuses
update arithmetic whose result DynamoDB cannot store, and checks a
transaction's conditions before its writes instead of copying each table.
Its SQS keeps a batch entry's system attributes (AWSTraceHeader), as a
single send's, and keeps a FIFO group in order when it is redelivered, when
a message lapses mid-receive (see _fifo_in_order) and when a consumer
changes a message's visibility late or under an old receipt (see
_in_flight_only, _latest_receipt_only), and remembers a FIFO queue's
deduplication ids for 5 minutes after their message is deleted
(_remembered_dedup).

For tests only, POST /outflow-faults/transaction-conflict?table=T&key=K
makes the next TransactWriteItems that touches the item whose hash key is K
in table T cancel with a TransactionConflict for that item, as DynamoDB
does when another transaction holds it (moto, serialised by the lock
below, never produces one); POST /outflow-faults/sqs-clock?step_ms=N makes
SQS's clock move on N ms at each reading (0: the wall clock again).
"""
import collections
import copy
import decimal
import functools
import json
import logging
import os
import sys
import threading
import time

from moto import server
from moto.dynamodb.comparisons import get_filter_expression
from moto.dynamodb.exceptions import (
    ERROR_TYPE_PREFIX,
    ConditionalCheckFailed,
    DynamodbException,
    MockValidationException,
    MultipleTransactionsException,
    TooManyTransactionsException,
    TransactionCanceledException,
    TransactWriteSingleOpException,
)
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType
from moto.core.responses import ActionResult
from moto.dynamodb.responses import DynamoHandler
from moto.moto_server.werkzeug_app import DomainDispatcherApplication
from moto.sqs import models as sqs_models
from moto.sqs.exceptions import ReceiptHandleIsInvalid
from moto.sqs.models import Queue, SQSBackend
from werkzeug import serving
from werkzeug.wrappers import Request, Response

_lock = threading.RLock()

# (table name, hash key value) -> how many more transactions touching that
# item cancel with a TransactionConflict. Armed by the endpoint below.
_conflicts = {}
_FAULT_PATH = "/outflow-faults/transaction-conflict"
_CLOCK_PATH = "/outflow-faults/sqs-clock"


def _fault_endpoint(fn):
    """Serves the fault endpoints and passes every other request to moto."""

    @functools.wraps(fn)
    def call(self, environ, start_response):
        if environ.get("PATH_INFO") == _CLOCK_PATH:
            return _clock_endpoint(environ, start_response)
        if environ.get("PATH_INFO") != _FAULT_PATH:
            return fn(self, environ, start_response)
        args = Request(environ).args
        table, key = args.get("table"), args.get("key")
        if environ.get("REQUEST_METHOD") != "POST" or not table or not key:
            return Response("POST with table and key\n", status=400)(environ, start_response)
        with _lock:
            ident = (table, key)
            _conflicts[ident] = _conflicts.get(ident, 0) + 1
        return Response("armed\n")(environ, start_response)

    return call


def _clock_endpoint(environ, start_response):
    """Sets how far SQS's clock moves on at each reading (step_ms; 0 for
    the wall clock again). A clock that runs on while moto walks a queue
    stands for a long walk, so a test can make a message's visibility lapse
    in the middle of one receive."""
    try:
        step = float(Request(environ).args.get("step_ms", ""))
    except ValueError:
        step = -1
    if environ.get("REQUEST_METHOD") != "POST" or step < 0:
        return Response("POST with step_ms >= 0\n", status=400)(environ, start_response)
    with _clock_lock:
        _clock["step"] = step
    return Response("set\n")(environ, start_response)


def _hash_value(table, key):
    """The hash key's wire value, {"S": "k"} -> "k"; None for a key that
    lacks it, which moto goes on to refuse as it always did."""
    value = key.get(table.hash_key_attr)
    if not isinstance(value, dict) or len(value) != 1:
        return None
    return str(next(iter(value.values())))


def _conflict_armed(table_name, key_value):
    """Consumes one armed conflict for the item, if there is one."""
    ident = (table_name, key_value)
    if _conflicts.get(ident, 0) < 1:
        return False
    _conflicts[ident] -= 1
    if _conflicts[ident] == 0:
        del _conflicts[ident]
    return True


def _atomic_with(lock, fn):
    @functools.wraps(fn)
    def locked(*args, **kwargs):
        with lock:
            return fn(*args, **kwargs)

    return locked


def _atomic(fn):
    return _atomic_with(_lock, fn)


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
            # Copy the item, not its attrs: a copied attrs dict re-checks
            # the item size on every key it sets, under the global lock.
            saved = copy.deepcopy(item).attrs if item is not None else None
        except Exception:  # the call itself reports a bad table or key
            item = None
        try:
            return fn(self, table_name, key, *args, **kwargs)
        except Exception:
            if item is not None:
                item.attrs = saved
            raise

    return update


# Exact for any two numbers DynamoDB stores (at most 38 digits, magnitudes
# 1E-130 to under 1E+126), so the check below sees the true result.
_exact = decimal.Context(prec=300)


def _storable(fn):
    """DynamoDB refuses an update whose arithmetic result needs more than 38
    significant digits or leaves its range, with a ValidationException.
    moto rounds such a sum to 28 digits (1E-38 + 1 gives 1), or fails with
    an internal error (1E-130 + 1): either hides the refusal a caller must
    handle. This checks the exact result first and refuses as DynamoDB
    does; a storable one is left to moto."""

    @functools.wraps(fn)
    def op(self, other):
        if self.is_number() and other.is_number():
            try:
                a, b = decimal.Decimal(self.value), decimal.Decimal(other.value)
            except decimal.InvalidOperation:
                return fn(self, other)
            total = _exact.add(a, b) if fn.__name__ == "__add__" else _exact.subtract(a, b)
            total = total.normalize(_exact)
            if total != 0 and (len(total.as_tuple().digits) > 38 or not -130 <= total.adjusted() <= 125):
                raise MockValidationException(
                    "Number overflow. Attempting to store a number with more than 38 significant digits or out of range"
                )
        return fn(self, other)

    return op


def _transact_write_items(self, transact_items):
    """moto's TransactWriteItems deep-copies every table it touches before
    it writes, to roll back: with a stream on, that is the table and all its
    stream records, per transaction, so a soak of ordered rows (one
    transaction each) grew moto past 12 GB and slowed quadratically. The
    items of one transaction are distinct, so each condition can be checked
    against the state before any write, as DynamoDB does: this checks them
    all first, cancels without writing if one fails, and otherwise writes.
    A write that still fails (an item over the size limit) puts back the
    items written before it; their stream records stay, a difference from
    DynamoDB in that rare case only."""
    if len(transact_items) > 100:
        raise TooManyTransactionsException()
    # The whole request is checked before any item is: an invalid one is
    # refused without consuming an armed conflict fault.
    seen, plan, errors = set(), [], []
    for item in transact_items:
        if len(item) > 1:
            raise TransactWriteSingleOpException()
        op_type, op = next(iter(item.items()))
        if op_type not in {"ConditionCheck", "Put", "Delete", "Update"}:
            raise ValueError("Unsupported transaction operation")
        table_name = op["TableName"]
        table = self.get_table(table_name)
        if op_type == "Put":
            attrs = op["Item"]
            key = {table.hash_key_attr: attrs[table.hash_key_attr]}
            if table.range_key_attr is not None:
                key[table.range_key_attr] = attrs[table.range_key_attr]
        else:
            key = op["Key"]
        ident = (str(table_name), str(dict(sorted(key.items()))))
        if ident in seen:
            raise MultipleTransactionsException()
        seen.add(ident)
        plan.append((op_type, op, table, key))
    for op_type, op, table, key in plan:
        table_name = op["TableName"]
        current = self.get_item(table_name, key)
        reason = (None, None, None)
        if _conflicts and _conflict_armed(str(table_name), _hash_value(table, key)):
            # DynamoDB's reason when another transaction holds the item.
            errors.append(("TransactionConflict", "Transaction is ongoing for the item", None))
            continue
        cond = op.get("ConditionExpression")
        if cond is not None:
            check = get_filter_expression(cond, op.get("ExpressionAttributeNames"), op.get("ExpressionAttributeValues"))
            if not check.expr(current):
                old = None
                if op.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD" and current:
                    old = current.to_json()["Attributes"]
                reason = ("ConditionalCheckFailed", str(ConditionalCheckFailed().message), old)
        errors.append(reason)
    if any(code is not None for code, _, _ in errors):
        raise TransactionCanceledException(errors)

    saved = []
    for i, (op_type, op, table, key) in enumerate(plan):
        hash_key, range_key = self.get_keys_value(table, key)
        before = table.get_item(hash_key, range_key)
        saved.append((table, hash_key, range_key, copy.deepcopy(before)))
        args = dict(
            condition_expression=op.get("ConditionExpression"),
            expression_attribute_names=op.get("ExpressionAttributeNames"),
            expression_attribute_values=op.get("ExpressionAttributeValues"),
        )
        try:
            if op_type == "Put":
                self.put_item(op["TableName"], op["Item"], **args)
            elif op_type == "Delete":
                self.delete_item(op["TableName"], key, **args)
            elif op_type == "Update":
                self.update_item(op["TableName"], key, update_expression=op["UpdateExpression"], **args)
        except (MultipleTransactionsException, MockValidationException):
            _put_back(saved)
            raise
        except Exception as e:  # as moto: the reason names the exception
            _put_back(saved)
            reasons = [(None, None, None)] * len(plan)
            reasons[i] = (type(e).__name__, str(e), None)
            raise TransactionCanceledException(reasons)


class _IdempotentParameterMismatch(DynamodbException):
    error_type = ERROR_TYPE_PREFIX + "IdempotentParameterMismatchException"

    def __init__(self):
        super().__init__(
            self.error_type,
            message="Request with the same client request token but different parameters was received",
        )


# ClientRequestToken -> (the request's TransactItems as JSON, when the token
# lapses on time.monotonic()), for each TransactWriteItems that succeeded;
# _lapsing holds the same (when, token) in the order they lapse.
_tokens = {}
_lapsing = collections.deque()
_TOKEN_WINDOW = 600  # DynamoDB's idempotency window: 10 minutes


def _idempotent(handler):
    """TransactWriteItems with a ClientRequestToken, as DynamoDB takes it:
    a repeat of a call that succeeded, within 10 minutes, succeeds again
    without writing; the same token with other items is refused with
    IdempotentParameterMismatchException. moto ignores the token. The SDK
    fills one in for every call and keeps it across its retries, so a
    retry of a transaction whose answer was lost (a timeout under load)
    succeeded on DynamoDB and failed on moto with the transaction's own
    condition: the 20,000-row soak's staging stopped on "stage
    soak-006849: condition failed: row is pending at attempt 0". The
    check and the writes hold the item lock, so two copies of one call
    cannot both write."""

    @functools.wraps(handler)
    def call(self):
        token = self.body.get("ClientRequestToken")
        if not token:
            return handler(self)
        request = json.dumps(self.body.get("TransactItems"), sort_keys=True)
        with _lock:
            now = time.monotonic()
            while _lapsing and _lapsing[0][0] <= now:
                _, old = _lapsing.popleft()
                if old in _tokens and _tokens[old][1] <= now:
                    del _tokens[old]
            seen = _tokens.get(token)
            if seen is not None:
                if seen[0] != request:
                    raise _IdempotentParameterMismatch()
                return ActionResult({"ConsumedCapacity": [], "ItemCollectionMetrics": {}})
            result = handler(self)
            _tokens[token] = (request, now + _TOKEN_WINDOW)
            _lapsing.append((now + _TOKEN_WINDOW, token))
            return result

    return call


def _put_back(saved):
    for table, hash_key, range_key, item in reversed(saved):
        if range_key is None:
            if item is None:
                table.items.pop(hash_key, None)
            else:
                table.items[hash_key] = item
        elif item is None:
            table.items.get(hash_key, {}).pop(range_key, None)
        else:
            table.items.setdefault(hash_key, {})[range_key] = item


def _batch_system_attributes(fn):
    """moto's SendMessageBatch drops each entry's MessageSystemAttributes
    (AWSTraceHeader), which its SendMessage keeps and SQS keeps for both;
    this puts them on the messages the batch made."""

    @functools.wraps(fn)
    def send(self, queue_name, entries):
        messages, failed = fn(self, queue_name, entries)
        by_id = {e.get("Id"): e.get("MessageSystemAttributes") for e in entries.values()}
        for message in messages:
            attrs = by_id.get(getattr(message, "user_id", None))
            if attrs:
                message.system_attributes = attrs
        return messages, failed

    return send


# One lock for SQS's queue state: moto's server is threaded, and two
# receives at once could each hand out a message of one FIFO group.
_sqs_lock = threading.RLock()


def _in_flight_groups(queue):
    """The FIFO groups with a message in flight: received, and not yet
    visible again. moto counted a message whose visibility had lapsed too,
    so when a group's messages lapsed together it skipped the first (its
    group "held" by the second) and handed out the second: SQS delivers a
    group again from its first message."""
    return {m.group_id for m in queue._pending_messages if m.group_id is not None and not m.visible}


def _fifo_in_order(receive):
    """moto's receive, one pass at a time under _sqs_lock, so no other
    call changes the queue mid-pass; a long poll waits between passes
    outside the lock."""

    @functools.wraps(receive)
    def received(self, queue_name, count, wait_seconds_timeout, visibility_timeout, message_attribute_names=None):
        end = time.monotonic() + (wait_seconds_timeout or 0)
        while True:
            with _sqs_lock:
                # One pass reads one time. moto reads the clock afresh for
                # each message: it listed the visible messages at one
                # instant and worked out the groups in flight at a later
                # one, so a head whose visibility lapsed between the two
                # was left out of the list while its group counted as free:
                # the head's successor went first (the e2e soak, seeds
                # 614760062 and 271828182: a place applied before the one
                # staged and sent before it).
                _pass.now = _sqs_now()
                try:
                    result = receive(self, queue_name, count, 0, visibility_timeout, message_attribute_names)
                finally:
                    _pass.now = None
            if result or time.monotonic() >= end:
                return result
            time.sleep(min(0.05, max(0, end - time.monotonic())))

    return received


class _MessageNotInflight(ReceiptHandleIsInvalid):
    """SQS's answer to a visibility change of a message not in flight, or
    under a receipt it no longer holds. A ReceiptHandleIsInvalid, so that
    moto's batch call reports the entry failed rather than the call."""

    def __init__(self):
        super().__init__()
        self.code, self.message = "MessageNotInflight", "The message referred to isn't in flight."


def _in_flight_only(change):
    """moto's ChangeMessageVisibility, for a message in flight under its
    latest receipt only. moto took any receipt the message ever had, and a
    message not in flight: a renewal that came after the consumer's
    release, or after the message lapsed and was received again, hid it
    again outside moto's pending set, from which the groups in flight are
    worked out, and the group's next message went first; an old receipt
    released another consumer's message. SQS refuses both."""

    @functools.wraps(change)
    def changed(self, queue_name, receipt_handle, visibility_timeout):
        queue = self.get_queue(queue_name)
        for message in queue._messages:
            if message.had_receipt_handle(receipt_handle):
                if message.receipt_handle != receipt_handle or message.visible or message not in queue.pending_messages:
                    raise _MessageNotInflight()
                break
        return change(self, queue_name, receipt_handle, visibility_timeout)

    return changed


def _latest_receipt_only(delete):
    """moto's Queue.delete_message, which deleted a message under any
    receipt it ever had. SQS: a message received more than once is deleted
    only under its latest receipt; under an older one the request succeeds
    and the message stays (it goes on to its current consumer)."""

    @functools.wraps(delete)
    def deleted(self, receipt_handle):
        for message in self._messages:
            if message.had_receipt_handle(receipt_handle) and message.receipt_handle != receipt_handle:
                return
        return delete(self, receipt_handle)

    return deleted


# The queue attributes moto counts by walking every message of the queue.
_COUNTS = frozenset(
    ("ApproximateNumberOfMessages", "ApproximateNumberOfMessagesDelayed", "ApproximateNumberOfMessagesNotVisible")
)
_no_counts = threading.local()


def _queue_attributes(attributes):
    """moto's Queue.attributes, without the message counts while a call
    _without_counts marks runs. moto reads all of a queue's attributes to
    get one that never changes with its messages (ContentBasedDeduplication
    twice per message sent and once more to deduplicate it,
    MessageRetentionPeriod three times per message received), and each
    count walks every message: a queue of n messages cost O(n) per message
    sent or received (a batch send took 3 s at 1,600 messages). Both the
    counting and the uncounting read hold _sqs_lock, so the uncounting
    read's shadowed list is never seen by another thread."""
    static = [a for a in Queue.BASE_ATTRIBUTES if a not in _COUNTS]

    def get(self):
        with _sqs_lock:
            if not getattr(_no_counts, "on", False):
                return attributes.fget(self)
            self.BASE_ATTRIBUTES = static
            try:
                return attributes.fget(self)
            finally:
                del self.BASE_ATTRIBUTES

    return property(get)


def _without_counts(fn):
    """Runs fn with Queue.attributes uncounted (see _queue_attributes)."""

    @functools.wraps(fn)
    def call(*args, **kwargs):
        outer = getattr(_no_counts, "on", False)
        _no_counts.on = True
        try:
            return fn(*args, **kwargs)
        finally:
            _no_counts.on = outer

    return call


# SQS's clock: the wall clock, moved on by _clock["step"] milliseconds at
# each reading (the clock fault endpoint), and held still through one
# receive pass (_pass.now).
_clock_lock = threading.Lock()
_clock = {"step": 0.0, "offset": 0.0}
_pass = threading.local()


def _sqs_now():
    with _clock_lock:
        _clock["offset"] += _clock["step"]
        return time.time() * 1000.0 + _clock["offset"]


def _wall_millis(dt=None):
    """moto's unix_time_millis, from time.time() when no datetime is given:
    moto's builds three datetimes per call, and it is called for every
    message of a queue on every receive (Message.visible, .delayed), which
    made that walk cost tens of microseconds a message. Within a receive
    pass it is the pass's one time."""
    if dt is not None:
        return _unix_time_millis(dt)
    now = getattr(_pass, "now", None)
    return now if now is not None else _sqs_now()


def _remembered_dedup(add):
    """SQS keeps a FIFO queue's deduplication id for 5 minutes from the
    send it accepted, whether or not that message was received and deleted
    since: a send with the id within that window is accepted and dropped.
    moto forgets the id with its message, so a key sent again after its
    first copy was consumed reached the consumer twice."""

    window = sqs_models.DEDUPLICATION_TIME_IN_SECONDS * 1000

    @functools.wraps(add)
    def call(self, message):
        dedup = message.deduplication_id
        if not self.fifo_queue or not dedup:
            return add(self, message)
        sent = message.sent_timestamp or _wall_millis()
        seen = self.__dict__.setdefault("_outflow_dedup", {})
        at = seen.get(dedup)
        if at is not None and sent - at < window:
            return None
        seen[dedup] = sent
        if len(seen) > 10000:
            for old in [d for d, t in seen.items() if sent - t >= window]:
                del seen[old]
        return add(self, message)

    return call


_unix_time_millis = sqs_models.unix_time_millis
sqs_models.unix_time_millis = _wall_millis
Queue.add_message = _remembered_dedup(Queue.add_message)
Queue.attributes = _queue_attributes(Queue.attributes)
Queue.add_message = _without_counts(Queue.add_message)
for _name in ("_validate_message", "is_message_valid_based_on_retention_period"):
    setattr(SQSBackend, _name, _without_counts(getattr(SQSBackend, _name)))
def _backend_by_host(get_backend_for_host):
    """moto's get_backend_for_host, remembered per host. For every request,
    under the dispatcher's one lock, moto lists its own package directory
    (a stat of each of some 200 entries) and then tries its URL patterns
    one by one: most of the server's time in the end-to-end soak, with the
    other requests queued behind the lock. The answer depends on the host
    alone, and moto's modules and patterns do not change while it runs."""
    known = {}

    @functools.wraps(get_backend_for_host)
    def get(self, host):
        if host not in known:
            known[host] = get_backend_for_host(self, host)
        return known[host]

    return get


DomainDispatcherApplication.get_backend_for_host = _backend_by_host(DomainDispatcherApplication.get_backend_for_host)
DynamoDBBackend.transact_write_items = _transact_write_items
DynamoHandler.transact_write_items = _idempotent(DynamoHandler.transact_write_items)
Queue.pending_message_groups = property(_in_flight_groups)
SQSBackend.receive_message = _fifo_in_order(SQSBackend.receive_message)
SQSBackend.change_message_visibility = _in_flight_only(SQSBackend.change_message_visibility)
Queue.delete_message = _latest_receipt_only(Queue.delete_message)
# GetQueueAttributes checks the names asked for against the queue's
# BASE_ATTRIBUTES before it reads them, outside _queue_attributes: while
# another thread's uncounted read shadows that list on the same queue, the
# check refused ApproximateNumberOfMessages as an unknown attribute (seen
# once, by a test counting a queue while consumers received from it).
for _name in ("send_message", "delete_message", "change_message_visibility", "get_queue_attributes"):
    setattr(SQSBackend, _name, _atomic_with(_sqs_lock, getattr(SQSBackend, _name)))
SQSBackend.send_message_batch = _atomic_with(_sqs_lock, _batch_system_attributes(SQSBackend.send_message_batch))
DomainDispatcherApplication.__call__ = _fault_endpoint(DomainDispatcherApplication.__call__)
DynamoType.__add__ = _storable(DynamoType.__add__)
DynamoType.__sub__ = _storable(DynamoType.__sub__)
DynamoDBBackend.update_item = _all_or_nothing(DynamoDBBackend.update_item)
# A read takes the lock too: moto's update of a new item stores the bare key
# first and sets the attributes after, so an unlocked GetItem could see an
# item DynamoDB never holds (a group item with no tail, read while a
# transaction created it). DynamoDB's GetItem is serializable with
# transactions.
for _name in ("put_item", "update_item", "delete_item", "transact_write_items", "get_item"):
    setattr(DynamoDBBackend, _name, _atomic(getattr(DynamoDBBackend, _name)))


def _inherited_socket(fd):
    """Makes werkzeug serve on the listening socket the parent opened
    (descriptor fd) instead of binding the port again: the port was never
    free for another process to take between the parent choosing it and
    this server answering on it."""
    make_server = serving.make_server

    @functools.wraps(make_server)
    def make(*args, **kwargs):
        kwargs["fd"] = fd
        return make_server(*args, **kwargs)

    return make


# werkzeug logs a line per request, which the tests discard unless
# OUTFLOW_MOTO_LOG is set: formatting and writing it cost more than some
# requests themselves.
if not os.environ.get("OUTFLOW_MOTO_LOG"):
    logging.getLogger("werkzeug").setLevel(logging.WARNING)

_fd = os.environ.pop("OUTFLOW_MOTO_FD", None)
if _fd:
    serving.make_server = _inherited_socket(int(_fd))

server.main(sys.argv[1:])
