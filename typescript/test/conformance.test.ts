/** The TypeScript producer held to the shared conformance vectors: the Go producer's tests (conformance_test.go) and the Python package's read the same files. */

import assert from "node:assert/strict";
import { test } from "node:test";
import { DynamoDBClient, TransactionCanceledException } from "@aws-sdk/client-dynamodb";
import {
  KINDS,
  OutflowError,
  Producer,
  TransactError,
  currentTraceParent,
  decodePublished,
  loadPublished,
  parseRoutes,
  validateRow,
  type Config,
  type DynamoDBClientLike,
  type Kind,
  type TransactWriteItem,
} from "../src/index.js";
import * as item from "../src/item.js";
import { FakeDynamoDB } from "./fakes.js";
import * as vectors from "./vectors.js";
import type { Json } from "./vectors.js";

const ROWS = vectors.load("rows.json");
const INVALID = vectors.load("invalid.json");
const CLASSIFY = vectors.load("classify.json");
const PUBLISHED = vectors.load("published.json");
const CONTENT = vectors.load("content.json");

/** Every validation kind the Go producer has: invalid.json must give each. */
const VALIDATION_KINDS: readonly Kind[] = [
  "empty_queue", "invalid_key", "empty_payload", "too_large", "too_many_attributes", "attribute_name",
  "attribute_value", "group_required", "invalid_id", "group_not_fifo", "not_json", "event_field", "item_too_large", "no_route",
  "ordered_route", "duplicate_key", "too_many_items", "order_unknown", "invalid_config",
];

test("the vectors are all there", () => {
  // Counts the Go and Python suites read too (the table in conformance/README.md): a vector file cut short fails here.
  assert.ok(ROWS.length >= 29, `rows.json: ${ROWS.length}`);
  assert.ok(INVALID.length >= 142, `invalid.json: ${INVALID.length}`);
  assert.ok(CLASSIFY.length >= 22, `classify.json: ${CLASSIFY.length}`);
  assert.ok(PUBLISHED.length >= 24, `published.json: ${PUBLISHED.length}`);
  assert.ok(CONTENT.length >= 8, `content.json: ${CONTENT.length}`);
  const given = new Set(INVALID.map((v) => v.kind as string | null));
  for (const k of VALIDATION_KINDS) assert.ok(given.has(k), `invalid.json gives ${k}`);
  for (const k of VALIDATION_KINDS) assert.ok(KINDS.includes(k), `Kind has ${k}`);
  // Every kind a vector names is one this package has.
  const named = [...INVALID.map((v) => v.kind), ...PUBLISHED.map((v) => v.kind), ...CLASSIFY.flatMap((v) => v.expect.items.map((i: Json) => i.reason))];
  for (const k of named) if (k !== null && k !== undefined) assert.ok(KINDS.includes(k as Kind), `Kind has ${String(k)}`);
});

test("a DynamoDBClient is a DynamoDBClientLike", () => {
  const client: DynamoDBClientLike = new DynamoDBClient({ region: "us-east-1" });
  assert.ok(client);
});

function withXray<T>(value: string | undefined, run: () => Promise<T>): Promise<T> {
  const before = process.env["_X_AMZN_TRACE_ID"];
  if (value) process.env["_X_AMZN_TRACE_ID"] = value;
  else delete process.env["_X_AMZN_TRACE_ID"];
  return run().finally(() => {
    if (before === undefined) delete process.env["_X_AMZN_TRACE_ID"];
    else process.env["_X_AMZN_TRACE_ID"] = before;
  });
}

function ulidMs(key: string): number {
  const alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
  let n = 0;
  for (const ch of key.slice(0, 10)) n = n * 32 + alphabet.indexOf(ch);
  return n;
}

function fnv(key: string): number {
  let h = 0x811c9dc5;
  for (const b of Buffer.from(key, "utf8")) h = Math.imul(h ^ b, 0x01000193) >>> 0;
  return h;
}

for (const v of ROWS) {
  test(`rows: ${v.name}`, () =>
    withXray(v.context_trace?.xray, async () => {
      const expected = (v.items as Json[]).map(vectors.expectedShape);
      const stageIds = expected.filter((i) => "Put" in i).map((i) => i.Put.Item.stage_id.S as string);
      const producer = new Producer(new FakeDynamoDB(v.table ?? []), vectors.config(v.config), {
        clock: () => new Date(v.clock_ms as number),
        stageId: () => {
          const id = stageIds.shift();
          assert.ok(id !== undefined, "one stage id per put");
          return id;
        },
      });
      const rows = vectors.rows(v);
      let items: TransactWriteItem[];
      if (v.call === "transact_item") {
        assert.equal(rows.length, 1);
        items = [await producer.transactItem(rows[0]!)];
      } else {
        assert.equal(v.call, "transact_items");
        items = await producer.transactItems(rows);
      }
      const got = items.map(vectors.shape);
      if (v.generated_key) {
        for (const [i, g] of got.entries()) {
          const item = g.Put.Item;
          const key = item.pk.S as string;
          assert.match(key, vectors.ULID);
          assert.equal(ulidMs(key), v.clock_ms);
          item.pk = { S: "*" };
          if (expected[i].Put.Item.shard === undefined) {
            assert.equal(item.shard, undefined, "a lean row is staged outside the due index");
            continue;
          }
          assert.equal(item.shard.S, String(fnv(key) % (v.config.shards || 4)));
          item.shard = { S: "*" };
        }
      }
      assert.deepStrictEqual(got, expected);
    }));
}

for (const v of INVALID) {
  test(`invalid: ${v.name}`, async () => {
    const call = v.call as string;
    const kind = v.kind as Kind | null;
    const rows = vectors.rows(v);
    const run = async (): Promise<void> => {
      if (call === "validate") {
        assert.equal(rows.length, 1);
        validateRow(rows[0]!, v.config.max_message_bytes ?? 0);
        return;
      }
      const producer = new Producer(new FakeDynamoDB(v.table ?? []), vectors.config(v.config), { traceParent: () => "" });
      if (call === "new_producer") return;
      if (call === "transact_item") {
        assert.equal(rows.length, 1);
        await producer.transactItem(rows[0]!);
      } else if (call === "transact_items") {
        await producer.transactItems(rows);
      } else {
        assert.fail(`unknown call ${call}`);
      }
    };
    if (kind === null) {
      await run();
      return;
    }
    await assert.rejects(run, (e: unknown) => {
      assert.ok(e instanceof OutflowError, String(e));
      assert.equal(e.kind, kind, e.message);
      return true;
    });
  });
}

for (const v of CLASSIFY) {
  test(`classify: ${v.name}`, async () => {
    const client = new FakeDynamoDB(v.table ?? []);
    const producer = new Producer(client, vectors.config(v.config), { traceParent: () => "" });
    const items: TransactWriteItem[] = (v.own ?? []).map(vectors.toSdk);
    items.push(...(await producer.transactItems(vectors.rows(v))));
    const error = new TransactionCanceledException({
      message: "Transaction cancelled",
      $metadata: {},
      CancellationReasons: (v.reasons as Json[]).map(vectors.toSdk),
    });
    const explained = await producer.classify(error, items);
    assert.ok(explained instanceof TransactError, String(explained));
    assert.equal(explained.cause, error);
    assert.equal(explained.kind, "transaction_canceled");
    const got = explained.items.map((i) => ({ index: i.index, code: i.code, reason: i.reason, table: i.table, row: i.row, queue: i.queue, group: i.group }));
    assert.deepStrictEqual(got, v.expect.items);
    assert.equal(explained.retryable, v.expect.retryable);
    for (const want of v.expect.items as Json[]) if (want.reason !== null) assert.ok(explained.has(want.reason as Kind));
  });
}

for (const v of CONTENT) {
  test(`content digest: ${v.name}`, () => {
    assert.equal(item.contentDigest(vectors.payload(v.payload), v.attributes as Record<string, string> | undefined), v.digest);
  });
}

const STAGED: item.Content = {
  queue: "events.fifo",
  payload: new TextEncoder().encode('{"id":1}'),
  attributes: { type: "created", v: "1" },
  group: "g",
  notBeforeMs: 1796270000000,
};
const TOMBSTONE: item.Content = {
  ...STAGED,
  payload: new Uint8Array(),
  attributes: {},
  digest: item.contentDigest(STAGED.payload, STAGED.attributes),
  dropped: true,
};

// Go's TestSameContent_ComparesATombstoneByItsDigest: against the tombstone
// either way round, and against a done row that kept its payload.
for (const [name, change, same] of [
  ["the same row", {}, true],
  ["another trace context", { attributes: { type: "created", v: "1", traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" } }, true],
  ["another payload", { payload: new TextEncoder().encode('{"id":2}') }, false],
  ["another attribute value", { attributes: { type: "created", v: "2" } }, false],
  ["an attribute fewer", { attributes: { type: "created" } }, false],
  ["an attribute's name and value moved across", { attributes: { type: "created", v1: "" } }, false],
  ["the attributes in the payload", { payload: new TextEncoder().encode('{"id":1}typecreatedv1'), attributes: {} }, false],
  ["another queue", { queue: "other.fifo" }, false],
  ["another group", { group: "h" }, false],
  ["another delay", { notBeforeMs: 1796270001000 }, false],
] as [string, Partial<item.Content>, boolean][]) {
  test(`same content against a tombstone: ${name}`, () => {
    const retry = { ...STAGED, ...change };
    assert.equal(item.sameContent(TOMBSTONE, retry), same, "against the tombstone");
    assert.equal(item.sameContent(retry, TOMBSTONE), same, "either way round");
    if (!("traceparent" in retry.attributes)) assert.equal(item.sameContent(STAGED, retry), same, "against a done row that kept its payload");
  });
}

test("contentOf reads a tombstone, and falls back on a kept payload", () => {
  const base = { pk: { S: "k" }, queue: { S: "orders" }, status: { S: "done" }, content: { S: "sha256:00" } };
  const tomb = item.contentOf(base);
  assert.equal(tomb?.dropped, true);
  assert.equal(tomb?.digest, "sha256:00");
  const kept = item.contentOf({ ...base, payload: { S: "hello" } });
  assert.equal(kept?.dropped, false);
  assert.equal(new TextDecoder().decode(kept?.payload), "hello");
  assert.equal(item.contentOf({ ...base, attributes: { M: {} } })?.dropped, false);
  const { content: _content, ...plain } = base;
  assert.equal(item.contentOf(plain)?.dropped, false);
});

test("classify passes other errors through", async () => {
  const producer = new Producer(new FakeDynamoDB(), { table: "outbox", ordered: [] });
  const other = Object.assign(new Error("bad"), { name: "ValidationException" });
  assert.equal(await producer.classify(other, []), other);
  const boom = new RangeError("lost");
  assert.equal(await producer.classify(boom, []), boom);
});

for (const v of PUBLISHED) {
  test(`published: ${v.name}`, async () => {
    const client = new FakeDynamoDB(v.item !== null ? [v.item] : []);
    const run = async () => {
      const pub = await loadPublished(client, "outbox");
      return [pub, pub.apply(vectors.config(v.apply))] as const;
    };
    if (v.kind !== undefined && v.kind !== null) {
      await assert.rejects(run, (e: unknown) => {
        assert.ok(e instanceof OutflowError, String(e));
        assert.equal(e.kind, v.kind, e.message);
        return true;
      });
      return;
    }
    const [pub, cfg] = await run();
    const want = v.expect;
    assert.deepStrictEqual({ ...pub.routes }, want.routes);
    assert.deepStrictEqual({ ...pub.ordered }, want.ordered);
    assert.deepStrictEqual([pub.shards, pub.maxMessageBytes, pub.revision], [want.shards, want.max_message_bytes, want.revision]);
    assert.equal(pub.publishedAt.getTime(), want.published_at_ms);
    assert.equal(pub.publishedBy, want.published_by);
    assert.equal(pub.lean, want.lean ?? false);
    const c = want.config;
    assert.deepStrictEqual([cfg.table, cfg.shards, cfg.maxMessageBytes], [c.table, c.shards, c.max_message_bytes]);
    assert.deepStrictEqual([...(cfg.ordered ?? [])], c.ordered);
    assert.ok(cfg.routes !== undefined && cfg.routes !== null);
    assert.deepStrictEqual(parseRoutes(cfg.routes), parseRoutes(c.routes as Record<string, string>));
    assert.equal(cfg.lean, c.lean ?? false);
  });
}

test("stage ids and keys are fresh", async () => {
  const producer = new Producer(new FakeDynamoDB(), { table: "outbox", ordered: [] });
  const items = await Promise.all([1, 2, 3].map(() => producer.transactItem({ queue: "orders", payload: "x" })));
  const keys = new Set(items.map((i) => i.Put?.Item?.["pk"]?.S as string));
  const stageIds = new Set(items.map((i) => i.Put?.Item?.["stage_id"]?.S as string));
  assert.equal(keys.size, 3);
  assert.equal(stageIds.size, 3);
  for (const k of keys) assert.match(k, vectors.ULID);
  for (const s of stageIds) assert.match(s, vectors.STAGE_ID);
});

test("a row validates on its own", () => {
  validateRow({ queue: "orders", payload: Uint8Array.of(0x78) });
  assert.throws(
    () => validateRow({ queue: "orders.fifo", payload: "x" }),
    (e: unknown) => e instanceof OutflowError && e.kind === "group_required",
  );
});

test("a group on a route that is not FIFO is refused in the CLI's words", async () => {
  // Whether a row takes a group is its route's name's to say, as outflow
  // enqueue decides; each way of staging refuses it before sending.
  const row = { queue: "orders", group: "g1", payload: "x" };
  const producer = new Producer(new FakeDynamoDB(), { table: "outbox", ordered: [] });
  const want =
    'group "g1": route "orders" is not FIFO (its name does not end in .fifo), and only a FIFO queue or topic has message groups; drop the group';
  const refused = (e: unknown) => e instanceof OutflowError && e.kind === "group_not_fifo" && e.message.includes(want);
  assert.throws(() => validateRow(row), refused);
  await assert.rejects(producer.transactItem(row), refused);
  await assert.rejects(producer.transactItems([row]), refused);
  await assert.rejects(producer.transact([row]), refused);
  await assert.rejects(producer.put(row), refused);
});

test("an unknown route is refused saying where the routes came from", async () => {
  const item = PUBLISHED.find((v) => v.name === "a published configuration fills an empty Config")?.item as Json;
  const published = decodePublished("outbox", item).apply();
  const orders = "orders=https://sqs.us-east-1.amazonaws.com/123456789012/orders";
  const cases: [string, Config, string][] = [
    ["routes given", { table: "outbox", ordered: [], routes: orders }, `no such route: route "order-events" is not one of the routes given (orders)`],
    [
      "routes published",
      published,
      `no such route: route "order-events" is not one of the routes the dispatcher published in table outbox (orders, orders.fifo)`,
    ],
    ["routes changed after apply", { ...published, routes: orders, ordered: [] }, `no such route: route "order-events" is not one of the routes given (orders)`],
  ];
  for (const [name, config, want] of cases) {
    const producer = new Producer(new FakeDynamoDB(), config);
    await assert.rejects(
      producer.transactItem({ queue: "order-events", payload: "x" }),
      (e: unknown) => e instanceof OutflowError && e.kind === "no_route" && e.message === want,
      name,
    );
  }
});

test("empty routes are no routes", async () => {
  for (const routes of ["", " ", {}]) {
    const producer = new Producer(new FakeDynamoDB(), { table: "outbox", ordered: [], routes });
    await producer.transactItem({ queue: "anything", payload: "x" });
  }
});

test("transact refuses a ClientRequestToken", async () => {
  const producer = new Producer(new FakeDynamoDB(), { table: "outbox", ordered: [] });
  await assert.rejects(producer.transact([{ queue: "orders", payload: "x" }], [], { ClientRequestToken: "t" }), /ClientRequestToken/);
});

test("the trace comes from Lambda's X-Ray header", () =>
  withXray("Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=0", async () => {
    assert.equal(currentTraceParent(), "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-00");
    process.env["_X_AMZN_TRACE_ID"] = "Root=1-5759e988-bd862e3fe1be46a994272793";
    assert.equal(currentTraceParent(), "");
  }));
