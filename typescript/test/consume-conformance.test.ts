/**
 * The consumer's half held to the shared vectors in conformance/consumer
 * (decode.json and handler.json offline; inbox.json on the project's
 * patched moto server, every stored item checked), as Go's
 * consume/conformance_test.go and Python's
 * python/tests/test_consume_conformance.py hold theirs: a vector one
 * language fails is a bug in that language.
 */

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { DeleteItemCommand, GetItemCommand, PutItemCommand, type DynamoDBClient, type TransactWriteItem } from "@aws-sdk/client-dynamodb";
import {
  ConsumeError,
  Counts,
  DecodeError,
  DuplicateError,
  Handler,
  HoldLostError,
  Idempotency,
  InProgressError,
  Inbox,
  LateError,
  METRIC_NAMESPACE,
  OUTCOMES,
  OrderError,
  fromLambda,
  fromQueue,
  fromSqs,
  metricName,
  newMessage,
  type Message,
  type Result,
} from "../src/consume/index.js";
import { createInboxTable, liveSuite, liveTest } from "./tables.js";
import { ROOT, inboxOptions, payload, type Json } from "./vectors.js";

const CONSUMER = ROOT + "conformance/consumer/";

/** The entries of one vector file: a file that is missing, unreadable or empty fails the suite (at load, before any test). */
function load(name: string, member: string): Json[] {
  const data = JSON.parse(readFileSync(CONSUMER + name, "utf8")) as Record<string, unknown>;
  const out = data[member];
  assert.ok(Array.isArray(out) && out.length > 0, `${name}: no ${member}`);
  return out as Json[];
}

const DECODE = load("decode.json", "vectors");
const INBOX = load("inbox.json", "scenarios");
const HANDLER = load("handler.json", "batches");

test("the consumer vectors are all there", () => {
  // The counts the Go and Python suites read too: a file cut short fails here.
  assert.ok(DECODE.length >= 88, `decode.json: ${DECODE.length}`);
  assert.ok(INBOX.length >= 34, `inbox.json: ${INBOX.length}`);
  assert.deepStrictEqual(new Set(DECODE.map((v) => v.shape)), new Set(["lambda", "sdk"]));
  for (const v of DECODE) assert.ok(("want" in v) !== ("error" in v), `${v.name}: a want or an error`);
  assert.deepStrictEqual(new Set(DECODE.filter((v) => v.want).map((v) => v.want.envelope)), new Set(["sqs", "sns", "eventbridge"]));
  const errors = DECODE.filter((v) => v.error).map((v) => v.error);
  assert.deepStrictEqual(new Set(errors.map((e) => e.kind)), new Set(["not_outflow", "malformed"]));
  for (const env of ["", "sqs", "sns", "eventbridge"]) assert.ok(errors.some((e) => e.envelope === env), `an error with envelope ${JSON.stringify(env)}`);
  assert.ok(DECODE.some((v) => v.want?.closed), "a closing message");
  for (const env of ["sqs", "sns", "eventbridge"]) assert.ok(DECODE.some((v) => v.want?.redriven && v.want.envelope === env), `a redriven ${env} message`);
  assert.ok(INBOX.some((sc) => sc.config.join === "where_seen" && (sc.steps as Json[]).some((s) => s.message?.redriven)), "a redriven row joining a group");
  const outcomes = new Set(INBOX.flatMap((sc) => (sc.steps as Json[]).map((s) => s.outcome).filter((o) => o !== undefined)));
  for (const o of ["applied", "duplicate", "gap", "late", "closed", "no_group"]) assert.ok(outcomes.has(o), `an inbox step gives ${o}`);
  const configs = INBOX.map((sc) => sc.config);
  assert.deepStrictEqual(new Set(configs.map((c) => c.gaps)), new Set(["wait", "pass"]));
  assert.deepStrictEqual(new Set(configs.map((c) => c.late)), new Set(["record", "apply"]));
  assert.deepStrictEqual(new Set(configs.map((c) => c.join)), new Set(["from_start", "where_seen"]));
  assert.ok(INBOX.every((sc) => sc.exact), "every scenario checks its items exactly");
  const results = new Set(HANDLER.flatMap((b) => Object.values(b.results as Record<string, string>)));
  for (const r of ["error", "gap", "duplicate", "late"]) assert.ok(results.has(r), `a batch whose apply gives ${r}`);
  assert.ok(HANDLER.some((b) => b.failures.length > 0) && HANDLER.some((b) => b.failures.length === 0));
  assert.ok(HANDLER.some((b) => !b.closed_hook), "a batch without a closed hook");
  // Every batch counts its outcomes (issue 51), and one holds each.
  assert.ok(HANDLER.length >= 13, `handler.json: ${HANDLER.length}`);
  for (const b of HANDLER) assert.ok(b.outcomes && Object.keys(b.outcomes).length > 0, `${b.name}: no outcomes counted`);
  assert.ok(
    HANDLER.some((b) => OUTCOMES.every((o) => (b.outcomes?.[o] ?? 0) > 0)),
    "a batch holds every outcome",
  );
});

// -- decode.json ------------------------------------------------------------

function decodeVector(v: Json): Message {
  if (v.shape === "lambda") return fromLambda(v.record);
  const msg = structuredClone(v.message);
  // The SDK gives a binary attribute's value as bytes; the vector writes it in base64.
  for (const a of Object.values((msg.MessageAttributes ?? {}) as Record<string, Json>)) {
    if (typeof a.BinaryValue === "string") a.BinaryValue = Uint8Array.from(Buffer.from(a.BinaryValue, "base64"));
  }
  return "queue_url" in v ? fromQueue(v.queue_url as string, msg) : fromSqs(msg);
}

for (const v of DECODE) {
  test(`decode: ${v.name}`, () => {
    if (v.error) {
      assert.throws(
        () => decodeVector(v),
        (e: unknown) => {
          assert.ok(e instanceof DecodeError, String(e));
          assert.equal(e.kind, v.error.kind, e.message);
          assert.equal(e.envelope ?? "", v.error.envelope, e.message);
          return true;
        },
      );
      return;
    }
    const m = decodeVector(v);
    const got = {
      key: m.key,
      route: m.route,
      group: m.group,
      seq: m.seq,
      closed: m.closed,
      attempt: m.attempt,
      redriven: m.redriven,
      payload: m.payload,
      attributes: m.attributes,
      trace_parent: m.traceParent,
      envelope: m.envelope,
      message_id: m.messageId,
      receipt_handle: m.receiptHandle,
    };
    assert.deepStrictEqual(got, { redriven: false, ...v.want, payload: payload(v.want.payload) });
  });
}

// -- handler.json -----------------------------------------------------------

/** What applying key gives in batch: success, or the error the vector names. */
function result(batch: Json, key: string): void {
  switch (batch.results[key]) {
    case "error":
      throw new Error("the effect failed");
    case "gap":
      throw new OrderError(key, "g1", 2, 0);
    case "duplicate":
      throw new DuplicateError("already applied");
    case "late":
      throw new LateError("recorded late", new OrderError(key, "g1", 1, 5));
  }
}

for (const batch of HANDLER) {
  test(`handler: ${batch.name}`, async () => {
    const calls: string[] = [];
    const reported: string[] = [];
    const results: Result[] = [];
    const counts = new Counts();
    const metrics: string[] = [];
    const handler = new Handler(
      (m) => {
        calls.push(m.key);
        result(batch, m.key);
      },
      {
        closed: batch.closed_hook
          ? (m) => {
              calls.push("closed:" + m.key);
              result(batch, m.key);
            }
          : undefined,
        onFailure: (id) => reported.push(id),
        onResult: (r) => {
          results.push(r);
          counts.add(r);
        },
        log: () => {},
        metrics: (l) => void metrics.push(l),
      },
    );
    const resp = await handler.handle({ Records: batch.records });
    assert.deepStrictEqual(
      resp.batchItemFailures.map((f) => f.itemIdentifier),
      batch.failures,
    );
    assert.deepStrictEqual(calls, batch.calls);
    assert.deepStrictEqual(reported, batch.failures);
    const want = batch.outcomes as Record<string, number>;
    const counted: Record<string, number> = {};
    for (const o of OUTCOMES) if (counts.of(o) > 0) counted[o] = counts.of(o);
    assert.deepStrictEqual(counted, want, "the outcomes onResult heard");
    assert.equal(results.length, batch.records.length, "one result per message");
    assert.deepStrictEqual(
      results.map((r) => r.messageId),
      batch.records.map((r: Json) => r.messageId),
      "in the batch's order",
    );
    // One EMF line per batch (a closing message with no hook adds its own): the one counting Applied.
    const lines = metrics.map((l) => JSON.parse(l) as Record<string, Json>).filter((d) => "Applied" in d);
    assert.equal(lines.length, 1, `one batch line: ${metrics.join("\n")}`);
    const line = lines[0] as Json;
    const arn = batch.records[0].eventSourceARN as string;
    assert.equal(line.Queue, arn.slice(arn.lastIndexOf(":") + 1), "its Queue dimension");
    const declared = line._aws.CloudWatchMetrics[0];
    assert.equal(declared.Namespace, METRIC_NAMESPACE);
    assert.deepStrictEqual(declared.Dimensions, [["Queue"]]);
    assert.deepStrictEqual(
      declared.Metrics,
      OUTCOMES.map((o) => ({ Name: metricName(o), Unit: "Count" })),
      "every outcome's metric, always",
    );
    for (const o of OUTCOMES) assert.equal(line[metricName(o)], want[o] ?? 0, `the EMF line's ${metricName(o)}`);
  });
}

// -- inbox.json, live ---------------------------------------------------------

const suite = liveSuite();

function inboxTest(name: string, run: (db: DynamoDBClient, table: string) => Promise<void>): void {
  liveTest(suite, name, createInboxTable, "outflow-ts-consume-", run);
}

/** The scenarios' effect: append the message's key to one item's list. */
function effect(table: string, key: string): TransactWriteItem {
  return {
    Update: {
      TableName: table,
      Key: { pk: { S: "effects" } },
      UpdateExpression: "SET #h = list_append(if_not_exists(#h, :empty), :k)",
      ExpressionAttributeNames: { "#h": "history" },
      ExpressionAttributeValues: { ":empty": { L: [] }, ":k": { L: [{ S: key }] } },
    },
  };
}

/** A step's outcome and the cursor its error names, as the vectors write them. */
function outcome(op: string, error: unknown): [string, number | undefined] {
  if (error === undefined) return [op === "close" ? "closed" : "applied", undefined];
  if (error instanceof OrderError) return [error.kind, error.cursor];
  if (error instanceof LateError) return ["late", error.order?.cursor];
  if (error instanceof ConsumeError) return [error.kind, undefined];
  throw error;
}

/** A value the vectors write (a bool, a number, a string) as DynamoDB stores it. */
function stored(want: Json): Json {
  if (typeof want === "boolean") return { BOOL: want };
  if (typeof want === "number") return { N: String(want) };
  return { S: want };
}

async function getItem(db: DynamoDBClient, table: string, pk: string): Promise<Json> {
  return (await db.send(new GetItemCommand({ TableName: table, Key: { pk: { S: pk } }, ConsistentRead: true }))).Item;
}

async function history(db: DynamoDBClient, table: string): Promise<string[]> {
  const item = await getItem(db, table, "effects");
  return item ? (item.history.L as Json[]).map((v) => v.S as string) : [];
}

async function runScenario(db: DynamoDBClient, table: string, sc: Json): Promise<void> {
  const inbox = new Inbox(db, table, "c1", inboxOptions(sc.config));
  for (const [i, step] of (sc.steps as Json[]).entries()) {
    if (step.op === "delete") {
      await db.send(new DeleteItemCommand({ TableName: table, Key: { pk: { S: step.pk } } }));
      continue;
    }
    const mv = step.message;
    const m = newMessage({ key: mv.key, group: mv.group ?? "", seq: mv.seq ?? 0, closed: mv.closed ?? "", redriven: mv.redriven ?? false, attempt: 1 });
    let error: unknown = undefined;
    try {
      if (step.op === "close") await inbox.close(m);
      else await inbox.apply(m, [effect(table, m.key)]);
    } catch (e) {
      if (!(e instanceof ConsumeError)) throw e;
      error = e;
    }
    const [kind, cursor] = outcome(step.op, error);
    assert.equal(kind, step.outcome, `step ${i}: ${String(error)}`);
    if ("cursor" in step) assert.equal(cursor, step.cursor, `step ${i}: ${String(error)}`);
  }
  assert.deepStrictEqual(await history(db, table), sc.effects, "the effects committed, in order");
  for (const [pk, want] of Object.entries(sc.items as Record<string, Json>)) {
    const got = await getItem(db, table, pk);
    if (want === null) {
      assert.equal(got, undefined, `${pk}: ${JSON.stringify(got)}`);
      continue;
    }
    assert.ok(got !== undefined, `${pk} is missing`);
    if (sc.exact) {
      // Those attributes and only those, besides pk and at: the languages write the same items.
      const names = Object.keys(got).filter((n) => n !== "pk" && n !== "at");
      const wanted = Object.keys(want).filter((n) => want[n] !== null);
      assert.deepStrictEqual(new Set(names), new Set(wanted), `${pk}: ${JSON.stringify(got)}`);
      assert.ok(/^[0-9]+$/.test(got.at?.N ?? ""), `${pk}.at is a number: ${JSON.stringify(got)}`);
    }
    for (const [name, value] of Object.entries(want as Record<string, Json>)) {
      if (value === null) assert.ok(!(name in got), `${pk}.${name}: ${JSON.stringify(got)}`);
      else assert.deepStrictEqual(got[name], stored(value), `${pk}.${name}: ${JSON.stringify(got)}`);
    }
  }
}

for (const sc of INBOX) {
  inboxTest(`inbox: ${sc.name}`, (db, table) => runScenario(db, table, sc));
}

// -- beyond the vectors, live -------------------------------------------------

inboxTest("a TypeScript consumer continues from the items the vectors say Go writes, under the same consumer name", async (db, table) => {
  // ordered-in-order's items, as Go and Python leave them: the cursor at
  // place 3 (key c) and b's inbox item at place 2, written here by hand.
  const sc = INBOX.find((s) => s.name === "ordered-in-order");
  assert.ok(sc, "ordered-in-order is a scenario");
  for (const [pk, want] of Object.entries(sc.items as Record<string, Json>)) {
    const item: Json = { pk: { S: pk }, at: { N: "1700000000000" } };
    for (const [name, value] of Object.entries(want as Record<string, Json>)) item[name] = stored(value);
    await db.send(new PutItemCommand({ TableName: table, Item: item }));
  }
  const inbox = new Inbox(db, table, "c1");
  await assert.rejects(inbox.apply(newMessage({ key: "b", group: "g", seq: 2 }), [effect(table, "b")]), DuplicateError);
  await assert.rejects(
    inbox.apply(newMessage({ key: "e", group: "g", seq: 5 }), [effect(table, "e")]),
    (e: unknown) => e instanceof OrderError && e.gap && e.cursor === 3,
  );
  await inbox.apply(newMessage({ key: "d", group: "g", seq: 4 }), [effect(table, "d")]);
  await inbox.apply(newMessage({ key: "e", group: "g", seq: 5 }), [effect(table, "e")]);
  assert.deepStrictEqual(await history(db, table), ["d", "e"]);
  assert.deepStrictEqual((await getItem(db, table, "cursor c1 g")).seq, { N: "5" });
});

inboxTest("Handler with an Inbox on a FIFO queue: a gap fails its group's later messages; the redelivery applies them in order", async (db, table) => {
  const inbox = new Inbox(db, table, "c1");
  const handler = new Handler((m) => inbox.apply(m, [effect(table, m.key)]), { closed: (m) => inbox.close(m) });
  const batch = HANDLER.find((b) => b.name === "fifo-gap-is-a-failure"); // places 2, 3 of g1
  const first = HANDLER.find((b) => b.name === "fifo-later-failure-keeps-earlier")?.records[0]; // a, place 1 of g1
  assert.ok(batch && first);
  const failed = await handler.handle({ Records: batch.records });
  assert.deepStrictEqual(
    failed.batchItemFailures.map((f) => f.itemIdentifier),
    ["id-b", "id-c"],
  );
  assert.deepStrictEqual(await handler.handle({ Records: [first, ...batch.records] }), { batchItemFailures: [] });
  assert.deepStrictEqual(await history(db, table), ["a", "b", "c"]);
  // A redelivery of the whole batch is all duplicates: done, nothing applied again.
  assert.deepStrictEqual(await handler.handle({ Records: [first, ...batch.records] }), { batchItemFailures: [] });
  assert.deepStrictEqual(await history(db, table), ["a", "b", "c"]);
});

inboxTest("an Inbox with a TTL writes expires_at in Unix seconds, at in milliseconds", async (db, table) => {
  const now = new Date(1_700_000_000_123);
  const inbox = new Inbox(db, table, "c1", { ttl: 86_400_000, clock: () => now });
  await inbox.apply(newMessage({ key: "t", group: "g", seq: 1 }));
  const item = await getItem(db, table, "inbox c1 t");
  assert.deepStrictEqual(item.expires_at, { N: String(1_700_000_000 + 86_400) });
  assert.deepStrictEqual(item.at, { N: "1700000000123" });
  const cursor = await getItem(db, table, "cursor c1 g");
  assert.equal(cursor.expires_at, undefined, "a cursor is kept: a group is joined once");
  assert.deepStrictEqual(cursor.at, { N: "1700000000123" });
});

inboxTest("Idempotency: once per message, a copy refused while another holds it, taken over past the hold", async (db, table) => {
  let now = 1_700_000_000_000;
  const idem = new Idempotency(db, table, "c1", { hold: 30_000, ttl: 3_600_000, clock: () => new Date(now) });
  const runs: string[] = [];
  const m = newMessage({ key: "k1", attempt: 1 });
  assert.equal(
    await idem.do(m, () => {
      runs.push("first");
      return "done";
    }),
    "done",
  );
  await assert.rejects(
    idem.do(m, () => runs.push("again")),
    DuplicateError,
  );
  assert.deepStrictEqual(runs, ["first"]);
  const item = await getItem(db, table, "idempotency c1 k1");
  assert.deepStrictEqual(item.status, { S: "completed" });
  assert.equal(item.held_until, undefined);
  assert.deepStrictEqual(item.expires_at, { N: String(now / 1000 + 3600) });
  assert.deepStrictEqual(item.consumer, { S: "c1" });
  assert.match(item.token.S, /^[A-Z2-7]{26}$/);

  // A failed effect releases its record: the retry runs it.
  const m2 = newMessage({ key: "k2", attempt: 1 });
  await assert.rejects(
    idem.do(m2, async () => {
      throw new Error("boom");
    }),
    /boom/,
  );
  assert.equal(await getItem(db, table, "idempotency c1 k2"), undefined, "released");
  await idem.do(m2, () => runs.push("retry"));
  assert.equal(runs.at(-1), "retry");

  // A copy that arrives while another holds the record is refused; past the
  // hold it takes over, and the first copy's completion is lost.
  const m3 = newMessage({ key: "k3", attempt: 1 });
  await assert.rejects(
    idem.do(m3, async () => {
      const held = await getItem(db, table, "idempotency c1 k3");
      assert.deepStrictEqual(held.status, { S: "in_progress" });
      assert.deepStrictEqual(held.held_until, { N: String(now + 30_000) });
      assert.deepStrictEqual(held.expires_at, { N: String((now + 30_000) / 1000 + 3600 + 1) });
      await assert.rejects(
        idem.do(m3, () => runs.push("second copy")),
        InProgressError,
      );
      now += 31_000;
      await idem.do(m3, () => runs.push("taken over"));
    }),
    HoldLostError,
  );
  assert.equal(runs.at(-1), "taken over");
  assert.ok(!runs.includes("second copy"));
});

inboxTest("Idempotency without a TTL keeps a completed record for ever", async (db, table) => {
  const idem = new Idempotency(db, table, "c1", { hold: 1000 });
  await idem.do(newMessage({ key: "k" }), () => undefined);
  const item = await getItem(db, table, "idempotency c1 k");
  assert.deepStrictEqual(item.status, { S: "completed" });
  assert.equal(item.expires_at, undefined);
});
