/**
 * The consumer's half where the shared vectors leave a behaviour
 * unpinned: the Handler's partial batches on FIFO and standard queues and
 * out of time, how a body is read where Go's encoding/json has its own
 * rules (each expectation below is what Go's consume.FromLambda gives for
 * the same body, run when this was written), the Inbox's and
 * Idempotency's refusals of misuse, and the structural types against the
 * shapes of @types/aws-lambda and @aws-sdk/client-sqs. Offline.
 */

import assert from "node:assert/strict";
import { test } from "node:test";
import { DynamoDBClient, TransactionCanceledException } from "@aws-sdk/client-dynamodb";
import {
  CLOSED_RESTAGED,
  ConsumeError,
  DecodeError,
  DuplicateError,
  Envelope,
  Handler,
  HoldLostError,
  Idempotency,
  InProgressError,
  Inbox,
  LateError,
  NoClosedHookError,
  NoGroupError,
  OrderError,
  SkippedError,
  applyMessage,
  fromLambda,
  fromQueue,
  isOrdered,
  newMessage,
  type BatchResponse,
  type IdempotencyClient,
  type InboxClient,
  type LambdaSQSEvent,
  type LambdaSQSRecord,
  type Message,
  type SQSMessageLike,
} from "../src/consume/index.js";

const FIFO = "arn:aws:sqs:us-east-1:123456789012:orders.fifo";
const STANDARD = "arn:aws:sqs:us-east-1:123456789012:orders";

/** A Lambda record of a queue route's message: key k, place seq of group (on a FIFO queue). */
function record(id: string, key: string, arn: string, group = "", seq = 0, closed = ""): LambdaSQSRecord {
  const attr = (v: string) => ({ stringValue: v, dataType: "String" });
  const messageAttributes: Record<string, { stringValue: string; dataType: string }> = { "outflow.key": attr(key), "outflow.attempt": attr("1") };
  if (seq > 0) messageAttributes["outflow.seq"] = attr(String(seq));
  if (closed) messageAttributes["outflow.closed"] = attr(closed);
  return { messageId: id, receiptHandle: "r-" + id, body: key, attributes: group ? { MessageGroupId: group } : {}, messageAttributes, eventSourceARN: arn };
}

/** Runs a batch: what apply was given, and the failures reported with their reasons. */
async function run(
  records: LambdaSQSRecord[],
  fails: ReadonlySet<string>,
  options: { reserveMs?: number; context?: { getRemainingTimeInMillis(): number } } = {},
): Promise<{ calls: string[]; failures: string[]; reasons: unknown[] }> {
  const calls: string[] = [];
  const reasons: unknown[] = [];
  const handler = new Handler(
    (m) => {
      calls.push(m.key);
      if (fails.has(m.key)) throw new Error("boom " + m.key);
    },
    { onFailure: (_, e) => reasons.push(e), reserveMs: options.reserveMs },
  );
  const resp = await handler.handle({ Records: records }, options.context);
  return { calls, failures: resp.batchItemFailures.map((f) => f.itemIdentifier), reasons };
}

// -- Handler -------------------------------------------------------------------

test("Handler on a FIFO queue: a failure fails the rest of its group, not the other groups", async () => {
  const batch = [record("1", "a", FIFO, "g1", 1), record("2", "x", FIFO, "g2", 1), record("3", "b", FIFO, "g1", 2), record("4", "y", FIFO, "g2", 2)];
  const got = await run(batch, new Set(["a"]));
  assert.deepStrictEqual(got.calls, ["a", "x", "y"]);
  assert.deepStrictEqual(got.failures, ["1", "3"]);
  assert.ok(got.reasons[0] instanceof Error && /boom a/.test(got.reasons[0].message), "the failure's own error");
  assert.ok(got.reasons[1] instanceof SkippedError && got.reasons[1].kind === "skipped", "the group-mate is skipped, unapplied");
});

test("Handler on a standard queue: the same batch, each message stands alone", async () => {
  const batch = [record("1", "a", STANDARD, "g1"), record("2", "x", STANDARD, "g2"), record("3", "b", STANDARD, "g1")];
  const got = await run(batch, new Set(["a"]));
  assert.deepStrictEqual(got.calls, ["a", "x", "b"]);
  assert.deepStrictEqual(got.failures, ["1"]);
});

test("Handler: an undecodable message fails, and on a FIFO queue fails its group", async () => {
  const bad: LambdaSQSRecord = { messageId: "bad", body: "hello", attributes: { MessageGroupId: "g1" }, eventSourceARN: FIFO };
  const got = await run([bad, record("2", "b", FIFO, "g1", 2), record("3", "z", FIFO, "g3", 1)], new Set());
  assert.deepStrictEqual(got.calls, ["z"]);
  assert.deepStrictEqual(got.failures, ["bad", "2"]);
  assert.ok(got.reasons[0] instanceof DecodeError && got.reasons[0].kind === "not_outflow");
});

test("Handler: out of time, the messages not started are reported failed unapplied", async () => {
  let remaining = 5000;
  const context = { getRemainingTimeInMillis: () => (remaining -= 2000) };
  const batch = [record("1", "a", STANDARD), record("2", "b", STANDARD), record("3", "c", STANDARD)];
  // 3000 ms left before a, 1000 before b: under the 2000 reserved, b and c are left.
  const got = await run(batch, new Set(), { reserveMs: 2000, context });
  assert.deepStrictEqual(got.calls, ["a"]);
  assert.deepStrictEqual(got.failures, ["2", "3"]);
  assert.ok(got.reasons.every((e) => e instanceof SkippedError));
  // Without a context, or with time to spare, nothing is skipped.
  assert.deepStrictEqual((await run(batch, new Set(), { reserveMs: 2000 })).failures, []);
});

test("Handler: handle is bound, as Lambda calls an exported function; an event without records is no failure", async () => {
  const seen: string[] = [];
  const { handle } = new Handler((m) => void seen.push(m.key));
  assert.deepStrictEqual(await handle({ Records: [record("1", "a", STANDARD)] }), { batchItemFailures: [] });
  assert.deepStrictEqual(seen, ["a"]);
  assert.deepStrictEqual(await handle({}), { batchItemFailures: [] });
  assert.throws(() => new Handler(undefined as unknown as () => void), TypeError);
});

test("applyMessage: duplicates and late records are done; a closing message goes to closed, or fails for want of one", async () => {
  const m = fromLambda(record("1", "a", FIFO, "g", 1));
  await applyMessage(m, () => Promise.reject(new DuplicateError("dup")));
  await applyMessage(m, () => {
    throw new LateError("late");
  });
  await assert.rejects(applyMessage(m, () => Promise.reject(new OrderError("a", "g", 1, 0))), OrderError);
  const closing = fromLambda(record("2", "b", FIFO, "g", 2, "dead-letter"));
  assert.equal(closing.closed, "dead-letter");
  const got: string[] = [];
  await assert.rejects(
    applyMessage(closing, () => assert.fail("a closing message is never applied")),
    NoClosedHookError,
  );
  await applyMessage(
    closing,
    () => assert.fail("a closing message is never applied"),
    (c) => void got.push(c.key),
  );
  assert.deepStrictEqual(got, ["b"]);
});

// -- decoding where Go's encoding/json has its own rules --------------------------

/** A Lambda record of a standard queue whose body is body and which carries no Outflow attribute. */
function bodyOnly(body: string): LambdaSQSRecord {
  return { messageId: "m", receiptHandle: "r", body, attributes: {}, messageAttributes: {}, eventSourceARN: STANDARD };
}

const SNS_ATTRS = '"MessageAttributes":{"outflow.key":{"Type":"String","Value":"k1"},"outflow.attempt":{"Type":"Number","Value":"1"}}';
const eb = (detail: string) => `{"detail-type":"t","source":"s","detail":${detail}}`;
const text = (b: Uint8Array) => new TextDecoder().decode(b);

/** [name, body, expected: the key, payload and attributes Go gives, or the error kind and envelope]. */
const GO_CASES: [string, string, { key: string; payload?: string; attempt?: number; attributes?: Record<string, string> } | [string, string]][] = [
  ["null keeps a string member as it was", `{"Type":"Notification","Type":null,"Message":"x",${SNS_ATTRS}}`, { key: "k1", payload: "x" }],
  ["a map member given twice is merged", '{"Type":"Notification","Message":"x","MessageAttributes":{"outflow.key":{"Type":"String","Value":"k1"}},"MessageAttributes":{"outflow.attempt":{"Type":"Number","Value":"1"}}}', { key: "k1" }],
  ["null empties a map member", '{"Type":"Notification","Message":"x","MessageAttributes":{"outflow.key":{"Type":"String","Value":"k1"}},"MessageAttributes":null,"MessageAttributes":{"outflow.attempt":{"Type":"Number","Value":"1"}}}', ["not_outflow", "sns"]],
  ["null keeps an attribute's Value", '{"Type":"Notification","Message":"x","MessageAttributes":{"outflow.key":{"Type":"String","Value":"k1","Value":null},"outflow.attempt":{"Type":"Number","Value":"1"}}}', { key: "k1" }],
  ["an attribute that is null has no Type: dropped", '{"Type":"Notification","Message":"x","MessageAttributes":{"outflow.key":{"Type":"String","Value":"k1"},"outflow.attempt":null}}', ["malformed", "sns"]],
  ["an attribute Value that is a number is no envelope", '{"Type":"Notification","Message":"x","MessageAttributes":{"outflow.key":{"Type":"String","Value":"k1"},"outflow.attempt":{"Type":"Number","Value":1}}}', ["not_outflow", ""]],
  ["member names in lower case", `{"type":"Notification","message":"x",${SNS_ATTRS}}`, { key: "k1", payload: "x" }],
  ["a member name written with escapes", `{"\\u0054ype":"Notification","Message":"x",${SNS_ATTRS}}`, { key: "k1" }],
  ["the long s folds to S", `{"Type":"Notification","Me\u017F\u017Fage":"x",${SNS_ATTRS}}`, { key: "k1", payload: "x" }],
  ["ß does not fold to ss", `{"Type":"Notification","Me\u00DFage":"x",${SNS_ATTRS}}`, ["not_outflow", ""]],
  ["the dotless i does not fold to I", '{"Type":"Notification","Message":"x","MessageAttr\u0131butes":{"outflow.key":{"Type":"String","Value":"k1"}}}', ["not_outflow", "sns"]],
  ["the dotted I does not fold to I", '{"Type":"Notification","Message":"x","MessageAttr\u0130butes":{"outflow.key":{"Type":"String","Value":"k1"}}}', ["not_outflow", "sns"]],
  ["the Kelvin sign folds to K", eb('{"outflow":{"\u212Aey":"k1","attempt":1}}'), { key: "k1" }],
  ["a trailing comma is no JSON", `{"Type":"Notification","Message":"x",${SNS_ATTRS},}`, ["not_outflow", ""]],
  ["a byte order mark is no JSON", "\uFEFF{}", ["not_outflow", ""]],
  ["a raw tab in a string is no JSON", '{"Type":"a\tb"}', ["not_outflow", ""]],
  ["an empty body", "", ["not_outflow", ""]],
  ["a body that is null", "null", ["not_outflow", ""]],
  ["a Notification without Message", '{"Type":"Notification","MessageAttributes":{}}', ["not_outflow", ""]],
  ["a source that is a number", '{"detail-type":"t","source":5,"detail":{"outflow":{"key":"k1","attempt":1}}}', ["not_outflow", ""]],
  ["null after detail-type makes it absent", '{"detail-type":"t","detail-type":null,"detail":{"outflow":{"key":"k1","attempt":1}}}', ["not_outflow", ""]],
  ["the last detail of any case wins", '{"detail-type":"t","detail":{"outflow":{"key":"k1","attempt":1}},"DETAIL":{"outflow":{"key":"k2","attempt":1},"z":1}}', { key: "k2", payload: '{"z":1}' }],
  ["a detail that is a string", eb('"x"'), ["not_outflow", "eventbridge"]],
  ["outflow of another case is no outflow member", eb('{"Outflow":{"key":"k1","attempt":1}}'), ["not_outflow", "eventbridge"]],
  ["the last outflow member wins", eb('{"outflow":{"key":"k1","attempt":1},"a":1,"outflow":{"key":"k2","attempt":2}}'), { key: "k2", attempt: 2, payload: '{"a":1}' }],
  ["null keeps the attempt; two attributes maps merge", eb('{"outflow":{"key":"k1","attempt":2,"attempt":null,"attributes":{"a":"1"},"attributes":{"b":"2"}}}'), { key: "k1", attempt: 2, attributes: { a: "1", b: "2", source: "s", "detail-type": "t" } }],
  ["null keeps the key", eb('{"outflow":{"key":"k1","key":null,"attempt":1}}'), { key: "k1" }],
  ["an attribute that is null is empty", eb('{"outflow":{"key":"k1","attempt":1,"attributes":{"a":null}}}'), { key: "k1", attributes: { a: "", source: "s", "detail-type": "t" } }],
  ["an attribute that is a number", eb('{"outflow":{"key":"k1","attempt":1,"attributes":{"a":1}}}'), ["malformed", "eventbridge"]],
  ["an attribute named __proto__ is an attribute", eb('{"outflow":{"key":"k1","attempt":1,"attributes":{"__proto__":"x"}}}'), { key: "k1", attributes: { ["__proto__"]: "x", source: "s", "detail-type": "t" } }],
  ["attempt 1e0 is no whole number", eb('{"outflow":{"key":"k1","attempt":1e0}}'), ["malformed", "eventbridge"]],
  ["attempt -0", eb('{"outflow":{"key":"k1","attempt":-0}}'), ["malformed", "eventbridge"]],
  ["attempt past 64 bits", eb('{"outflow":{"key":"k1","attempt":9223372036854775808}}'), ["malformed", "eventbridge"]],
  ["a huge number elsewhere is only read", '{"x":1e999999,"detail-type":"t","detail":{"outflow":{"key":"k1","attempt":1}}}', { key: "k1" }],
  ["whitespace: values as written, the rest dropped", ' \t\r\n{ "detail-type" : "t" , "detail" : { "a" :\t{ "x" : [ 1 ,2 ] }\n, "outflow" : {"key":"k1","attempt":1} } } \n', { key: "k1", payload: '{"a":{ "x" : [ 1 ,2 ] }}' }],
  [
    "member names written again as Go writes them",
    eb('{"\\ud800x":1,"\\u2028":2,"\\u0007":3,"\\b\\f":4,"<>&":5,"\\ud83d\\ude00":6,"\\udc00\\ud800":7,"outflow":{"key":"k1","attempt":1}}'),
    { key: "k1", payload: '{"\uFFFDx":1,"\\u2028":2,"\\u0007":3,"\\b\\f":4,"<>&":5,"\u{1F600}":6,"\uFFFD\uFFFD":7}' },
  ],
  ["nesting 10,000 deep", `{"x":${"[".repeat(9999)}${"]".repeat(9999)},"detail-type":"t","detail":{"outflow":{"key":"k1","attempt":1}}}`, { key: "k1" }],
  ["nesting 10,001 deep", `{"x":${"[".repeat(10000)}${"]".repeat(10000)},"detail-type":"t","detail":{"outflow":{"key":"k1","attempt":1}}}`, ["not_outflow", ""]],
];

for (const [name, body, want] of GO_CASES) {
  test(`decode as Go does: ${name}`, () => {
    if (Array.isArray(want)) {
      assert.throws(
        () => fromLambda(bodyOnly(body)),
        (e: unknown) => e instanceof DecodeError && e.kind === want[0] && (e.envelope ?? "") === want[1],
      );
      return;
    }
    const m = fromLambda(bodyOnly(body));
    assert.equal(m.key, want.key);
    if (want.payload !== undefined) assert.equal(text(m.payload), want.payload);
    if (want.attempt !== undefined) assert.equal(m.attempt, want.attempt);
    if (want.attributes !== undefined) assert.deepStrictEqual(m.attributes, want.attributes);
  });
}

test("decode: message attributes named __proto__ or outflow.* of any case", () => {
  const r = record("1", "k", FIFO, "g", 4);
  const attrs = { ...r.messageAttributes, ["__proto__"]: { stringValue: "p" }, "OUTFLOW.X": { stringValue: "y" }, "Outflow.Closed": { stringValue: "z" } };
  Object.defineProperty(attrs, "__proto__", { value: { stringValue: "p" }, enumerable: true });
  const m = fromLambda({ ...r, messageAttributes: attrs });
  assert.deepStrictEqual(Object.keys(m.attributes), ["__proto__"]);
  assert.equal(m.attributes["__proto__"], "p");
  assert.equal(Object.getPrototypeOf(m.attributes), Object.prototype, "an own attribute, not the object's prototype");
  assert.equal(m.closed, "", "outflow.closed is matched exactly");
  assert.equal(m.seq, 4);
});

test("decode: a place past 2^53 is refused, where Go would take it: a number would round it", () => {
  // Go accepts any int64 place; a place this package cannot count exactly
  // would have its Inbox compare the wrong places, so it is malformed here.
  const r = record("1", "k", FIFO, "g", 1);
  const big = (seq: string) => fromLambda({ ...r, messageAttributes: { ...r.messageAttributes, "outflow.seq": { stringValue: seq } } });
  assert.equal(big(String(Number.MAX_SAFE_INTEGER)).seq, Number.MAX_SAFE_INTEGER);
  assert.throws(() => big("9007199254740993"), (e: unknown) => e instanceof DecodeError && e.kind === "malformed");
});

test("fromQueue: a FIFO queue's URL keeps the group; another queue's drops it", () => {
  const msg: SQSMessageLike = {
    MessageId: "m",
    Body: "x",
    Attributes: { MessageGroupId: "g" },
    MessageAttributes: { "outflow.key": { StringValue: "k" }, "outflow.attempt": { StringValue: "1" }, "outflow.seq": { StringValue: "2" } },
  };
  const fifo = fromQueue("https://sqs.us-east-1.amazonaws.com/1/q.fifo", msg);
  assert.deepStrictEqual([fifo.group, fifo.seq, fifo.envelope], ["g", 2, Envelope.SQS]);
  const std = fromQueue("https://sqs.us-east-1.amazonaws.com/1/q", msg);
  assert.deepStrictEqual([std.group, std.seq], ["", 0]);
});

// -- the structural types against the real shapes ------------------------------

/** @types/aws-lambda's SQSRecord, SQSEvent and SQSBatchResponse, as declared there (interfaces: no index signatures). */
interface AwsLambdaSQSRecordAttributes {
  AWSTraceHeader?: string | undefined;
  ApproximateReceiveCount: string;
  SentTimestamp: string;
  SenderId: string;
  ApproximateFirstReceiveTimestamp: string;
  SequenceNumber?: string | undefined;
  MessageGroupId?: string | undefined;
  MessageDeduplicationId?: string | undefined;
  DeadLetterQueueSourceArn?: string | undefined;
}
interface AwsLambdaSQSMessageAttribute {
  stringValue?: string | undefined;
  binaryValue?: string | undefined;
  stringListValues?: string[];
  binaryListValues?: string[];
  dataType: "String" | "Number" | "Binary" | string;
}
interface AwsLambdaSQSRecord {
  messageId: string;
  receiptHandle: string;
  body: string;
  attributes: AwsLambdaSQSRecordAttributes;
  messageAttributes: { [name: string]: AwsLambdaSQSMessageAttribute };
  md5OfBody: string;
  md5OfMessageAttributes?: string;
  eventSource: string;
  eventSourceARN: string;
  awsRegion: string;
}
interface AwsLambdaSQSEvent {
  Records: AwsLambdaSQSRecord[];
}
interface AwsLambdaSQSBatchResponse {
  batchItemFailures: { itemIdentifier: string }[];
}
/** @aws-sdk/client-sqs's Message, as declared there. */
interface ClientSqsMessage {
  MessageId?: string | undefined;
  ReceiptHandle?: string | undefined;
  MD5OfBody?: string | undefined;
  Body?: string | undefined;
  Attributes?: Partial<Record<"All" | "SenderId" | "SentTimestamp" | "MessageGroupId" | "SequenceNumber" | "AWSTraceHeader", string>> | undefined;
  MD5OfMessageAttributes?: string | undefined;
  MessageAttributes?:
    | Record<
        string,
        {
          StringValue?: string | undefined;
          BinaryValue?: Uint8Array | undefined;
          StringListValues?: string[] | undefined;
          BinaryListValues?: Uint8Array[] | undefined;
          DataType: string | undefined;
        }
      >
    | undefined;
}

test("the structural types take what Lambda's and the SDKs' types describe", async () => {
  // Compile-time checks first: these assignments are what a user writes.
  const lambdaEvent: AwsLambdaSQSEvent = { Records: [] };
  const asEvent: LambdaSQSEvent = lambdaEvent;
  const sqsMessage: ClientSqsMessage = { MessageId: "m", Body: "x", MessageAttributes: { "outflow.key": { StringValue: "k", DataType: "String" }, "outflow.attempt": { StringValue: "1", DataType: "Number" } } };
  const asMessage: SQSMessageLike = sqsMessage;
  const response: AwsLambdaSQSBatchResponse = await new Handler(() => {}).handle(asEvent);
  const asResponse: BatchResponse = response;
  const inboxClient: InboxClient = new DynamoDBClient({ region: "us-east-1" });
  const idempotencyClient: IdempotencyClient = new DynamoDBClient({ region: "us-east-1" });
  assert.deepStrictEqual(asResponse, { batchItemFailures: [] });
  assert.equal(fromQueue("", asMessage).key, "k");
  assert.ok(inboxClient && idempotencyClient);
});

// -- the Inbox and Idempotency, offline --------------------------------------------

test("Inbox refuses what it cannot be", () => {
  assert.throws(() => new Inbox(null, "", "c1"), TypeError);
  for (const name of ["", "a b", "a\tb", "a\nb"]) assert.throws(() => new Inbox(null, "t", name), TypeError, JSON.stringify(name));
  assert.throws(() => new Inbox(null, "t", "c1", { ttl: -1 }), RangeError);
  assert.ok(new Inbox(null, "t", "c-1.x_y"));
});

test("Inbox.transactItems without a client: the put, and for an ordered message the cursor update after the place before", () => {
  const now = new Date(1_700_000_000_000);
  const inbox = new Inbox(null, "t", "c1", { ttl: 1000, clock: () => now });
  const [put, update, ...rest] = inbox.transactItems(newMessage({ key: "k", group: "g", seq: 3 }));
  assert.equal(rest.length, 0);
  assert.deepStrictEqual(put?.Put?.Item, {
    pk: { S: "inbox c1 k" },
    consumer: { S: "c1" },
    key: { S: "k" },
    at: { N: "1700000000000" },
    expires_at: { N: "1700000001" },
    group: { S: "g" },
    seq: { N: "3" },
  });
  assert.equal(put?.Put?.ConditionExpression, "attribute_not_exists(#pk) OR #applied = :false");
  assert.deepStrictEqual(update?.Update?.Key, { pk: { S: "cursor c1 g" } });
  assert.equal(update?.Update?.ConditionExpression, "#seq = :after");
  assert.deepStrictEqual(update?.Update?.ExpressionAttributeValues?.[":after"], { N: "2" });
  // Unordered: the put alone. Place 1: the cursor must not exist yet.
  assert.equal(inbox.transactItems(newMessage({ key: "u" })).length, 1);
  assert.equal(inbox.transactItems(newMessage({ key: "k", group: "g", seq: 1 }))[1]?.Update?.ConditionExpression, "attribute_not_exists(#pk)");
});

test("Inbox: a closing message has no effect to add; the variants need the message's own refusal", async () => {
  const inbox = new Inbox(null, "t", "c1");
  const m = newMessage({ key: "k", group: "g", seq: 3 });
  assert.throws(() => inbox.transactItems({ ...m, closed: "dead-letter" }), ConsumeError);
  assert.throws(() => inbox.transactItems(newMessage({ key: "k", seq: 2 })), NoGroupError);
  assert.throws(() => inbox.transactItems(newMessage({ key: "" })), ConsumeError);
  const gap = new OrderError("k", "g", 3, 1);
  const passed = new OrderError("k", "g", 3, 5);
  assert.equal(gap.kind, "gap");
  assert.equal(passed.kind, "passed");
  assert.throws(() => inbox.transactItemsPast(m, passed), ConsumeError);
  assert.throws(() => inbox.transactItemsPast(newMessage({ key: "other", group: "g", seq: 3 }), gap), ConsumeError);
  assert.throws(() => inbox.transactItemsLate(m, gap), ConsumeError);
  assert.throws(() => inbox.transactItemsRecordLate(m, gap), ConsumeError);
  const past = inbox.transactItemsPast(m, gap);
  assert.deepStrictEqual([past[0]?.Put?.Item?.["gap_from"], past[0]?.Put?.Item?.["gap_to"]], [{ N: "2" }, { N: "2" }]);
  // A row sent in its turn ends a group's trial join (joining); a redriven row under JoinFromStart leaves it alone.
  assert.equal(past[1]?.Update?.UpdateExpression, "SET #seq = :seq, #key = :key, #consumer = :consumer, #group = :group, #at = :at ADD #skipped :skipped REMOVE #joining");
  const redriven = { ...m, redriven: true };
  assert.equal(inbox.transactItemsPast(redriven, gap)[1]?.Update?.UpdateExpression, "SET #seq = :seq, #key = :key, #consumer = :consumer, #group = :group, #at = :at ADD #skipped :skipped");
  const late = inbox.transactItemsRecordLate(m, passed);
  assert.equal(late.length, 1, "a late record moves no cursor");
  assert.deepStrictEqual(late[0]?.Put?.Item?.["applied"], { BOOL: false });
  assert.deepStrictEqual(late[0]?.Put?.Item?.["late_after"], { N: "5" });
  await assert.rejects(inbox.apply(m), /needs a DynamoDB client/);
});

test("Inbox.classify: success, other errors as they are, a refusal by the inbox item or the cursor", async () => {
  const inbox = new Inbox(null, "t", "c1");
  const m = newMessage({ key: "k", group: "g", seq: 3 });
  const tx = inbox.transactItems(m);
  assert.equal(await inbox.classify(m, tx, undefined), undefined);
  const other = new Error("network");
  assert.equal(await inbox.classify(m, tx, other), other);
  const cancel = (codes: string[], items: (Record<string, unknown> | undefined)[] = []) =>
    new TransactionCanceledException({
      message: "canceled",
      $metadata: {},
      CancellationReasons: codes.map((Code, i) => ({ Code, Item: items[i] as never })),
    });
  // The cursor refused it, and says where it is.
  const gap = await inbox.classify(m, tx, cancel(["None", "ConditionalCheckFailed"], [undefined, { pk: { S: "cursor c1 g" }, seq: { N: "1" } }]));
  assert.ok(gap instanceof OrderError && gap.gap && gap.cursor === 1);
  // The cursor moved to its turn since: the error as it is, to retry.
  const turn = cancel(["None", "ConditionalCheckFailed"], [undefined, { pk: { S: "cursor c1 g" }, seq: { N: "2" } }]);
  assert.equal(await inbox.classify(m, tx, turn), turn);
  // The inbox item refused a copy of the same place.
  const copy = await inbox.classify(m, tx, cancel(["ConditionalCheckFailed", "None"], [{ pk: { S: "inbox c1 k" }, group: { S: "g" }, seq: { N: "3" } }]));
  assert.ok(copy instanceof DuplicateError);
  // The key applied at another place: closing this one needs the client.
  const restaged = await inbox.classify(m, tx, cancel(["ConditionalCheckFailed", "None"], [{ pk: { S: "inbox c1 k" }, group: { S: "g" }, seq: { N: "1" } }]));
  assert.ok(restaged instanceof ConsumeError && restaged.kind === "error" && /needs the Inbox's DynamoDB client/.test(restaged.message), String(restaged));
  // A late record at another place: m is late too.
  const lateElsewhere = await inbox.classify(m, tx, cancel(["ConditionalCheckFailed"], [{ pk: { S: "inbox c1 k" }, group: { S: "g" }, seq: { N: "1" }, applied: { BOOL: false } }]));
  assert.ok(lateElsewhere instanceof LateError && lateElsewhere.order === undefined);
  // A refusal of another table's item is the effect's own: the error as it is.
  const effect = cancel(["ConditionalCheckFailed", "None", "None"]);
  assert.equal(await inbox.classify(m, [{ Put: { TableName: "other", Item: { pk: { S: "inbox c1 k" } } } }, ...tx], effect), effect);
  assert.equal(CLOSED_RESTAGED, "restaged");
});

test("Idempotency refuses what it cannot be, and a message without a key", async () => {
  const client = new DynamoDBClient({ region: "us-east-1" });
  assert.throws(() => new Idempotency(null as unknown as IdempotencyClient, "t", "c1"), TypeError);
  assert.throws(() => new Idempotency(client, "", "c1"), TypeError);
  assert.throws(() => new Idempotency(client, "t", "c 1"), TypeError);
  assert.throws(() => new Idempotency(client, "t", "c1", { hold: 0 }), RangeError);
  assert.throws(() => new Idempotency(client, "t", "c1", { ttl: -1 }), RangeError);
  await assert.rejects(new Idempotency(client, "t", "c1").do(newMessage({ key: "" }), () => 1), ConsumeError);
});

test("the errors: kinds, classes, and what a Message made by hand holds", () => {
  const cases: [ConsumeError, string][] = [
    [new DecodeError("malformed", "m", Envelope.SNS, "why"), "malformed"],
    [new DuplicateError("x"), "duplicate"],
    [new OrderError("k", "g", 2, 0), "gap"],
    [new OrderError("k", "g", 2, 5), "passed"],
    [new LateError("x"), "late"],
    [new NoGroupError("x"), "no_group"],
    [new InProgressError("x"), "in_progress"],
    [new HoldLostError("x"), "hold_lost"],
    [new SkippedError("x"), "skipped"],
    [new ConsumeError("x"), "error"],
  ];
  for (const [e, kind] of cases) {
    assert.ok(e instanceof ConsumeError && e instanceof Error);
    assert.equal(e.kind, kind);
  }
  assert.equal(new DecodeError("not_outflow", "m", null, "why").message, "message m: not a message Outflow sent: why");
  const m: Message = newMessage({ key: "k" });
  assert.deepStrictEqual([m.group, m.seq, m.closed, m.envelope, m.payload.length, isOrdered(m)], ["", 0, "", null, 0, false]);
  assert.ok(isOrdered(newMessage({ key: "k", group: "g", seq: 1 })));
});
