/**
 * The live conformance scenarios (conformance/producer/live.json) against
 * the project's patched moto server, as the Go and Python suites run them;
 * and a chain begun by the items the Go producer writes, continued from
 * TypeScript.
 */

import assert from "node:assert/strict";
import { test } from "node:test";
import { DynamoDBClient, GetItemCommand, PutItemCommand, ResourceNotFoundException, TransactWriteItemsCommand, UpdateItemCommand } from "@aws-sdk/client-dynamodb";
import { ConfigError, OutflowError, Producer, PutError, TransactError, loadPublished, type Kind, type TransactWriteItem } from "../src/index.js";
import { createOutboxTable, liveSuite, liveTest } from "./tables.js";
import * as vectors from "./vectors.js";
import type { Json } from "./vectors.js";

const LIVE = vectors.load("live.json");

const suite = liveSuite();

/** A test on a new outbox table; moto's URL for the faults it is told to inject. */
function live(name: string, run: (db: DynamoDBClient, table: string, url: string) => Promise<void>): void {
  liveTest(suite, name, createOutboxTable, "outflow-ts-", (db, table) => run(db, table, suite.moto?.url ?? ""));
}

test("the live scenarios are all there", () => {
  assert.ok(LIVE.length >= 8, `live.json: ${LIVE.length}`);
  const ops = new Set(LIVE.flatMap((v) => (v.steps as Json[]).map((s) => s.op as string)));
  for (const op of ["put", "transact", "prepare", "send", "arm_conflict", "settle_done"]) assert.ok(ops.has(op), `live.json has a ${op} step`);
});

function sub(v: Json, table: string): Json {
  return JSON.parse(JSON.stringify(v).replaceAll("${table}", table));
}

async function armConflict(url: string, table: string, key: string): Promise<void> {
  const query = new URLSearchParams({ table, key });
  const resp = await fetch(`${url}/outflow-faults/transaction-conflict?${query}`, { method: "POST", signal: AbortSignal.timeout(10_000) });
  await resp.arrayBuffer();
  assert.equal(resp.status, 200);
}

/**
 * The dispatcher's settle of key to done under a retention, written as Go's store writes it (internal/dynamo
 * Store.Done): the row a tombstone that keeps content, the digest Go wrote for the vector, in place of its payload and
 * attributes.
 */
async function settleDone(db: DynamoDBClient, table: string, key: string, content: string): Promise<void> {
  const now = Date.now();
  const names = ["pk", "status", "done_at", "expires_at", "content", "shard", "due_at", "claim_token", "lease_until", "payload", "attributes"];
  await db.send(
    new UpdateItemCommand({
      TableName: table,
      Key: { pk: { S: key } },
      ConditionExpression: "attribute_exists(#pk)",
      UpdateExpression:
        "SET #status = :done, #done_at = :done_at, #expires_at = :expires_at, #content = :content " +
        "REMOVE #shard, #due_at, #claim_token, #lease_until, #payload, #attributes",
      ExpressionAttributeNames: Object.fromEntries(names.map((n) => [`#${n}`, n])),
      ExpressionAttributeValues: {
        ":done": { S: "done" },
        ":done_at": { N: String(now) },
        ":expires_at": { N: String(Math.floor(now / 1000) + 24 * 3600) },
        ":content": { S: content },
      },
    }),
  );
}

function checkTx(step: Json, error: unknown): void {
  if (step.kind === null) {
    assert.equal(error, undefined, String(error));
    return;
  }
  assert.ok(error instanceof OutflowError && error.kind === step.kind, String(error));
  assert.ok(error instanceof TransactError);
  assert.deepStrictEqual(
    error.items.map((i) => ({ index: i.index, reason: i.reason })),
    step.items,
    error.message,
  );
  if ("retryable" in step) assert.equal(error.retryable, step.retryable);
}

async function getItem(db: DynamoDBClient, table: string, key: string): Promise<Json> {
  const out = await db.send(new GetItemCommand({ TableName: table, Key: { pk: { S: key } }, ConsistentRead: true }));
  return out.Item;
}

async function checkTable(db: DynamoDBClient, table: string, expect: Json[], absent: string[]): Promise<void> {
  for (const want of expect) {
    const key = want.pk.S as string;
    const item = await getItem(db, table, key);
    assert.ok(item, `${key} is staged`);
    const got = vectors.fromSdk(item);
    if ("stage_id" in want) vectors.checkVolatile(got, want);
    assert.deepStrictEqual(got, want, key);
  }
  for (const key of absent) assert.equal(await getItem(db, table, key), undefined, `${key} is not staged`);
}

for (const v of LIVE) {
  live(`live: ${v.name}`, async (db, table, url) => {
    const producer = new Producer(db, vectors.config({ ...v.config, table }), { traceParent: () => "" });
    const prepared = new Map<string, TransactWriteItem[]>();
    for (const step of v.steps as Json[]) {
      const rows = ((step.rows ?? []) as Json[]).map(vectors.row);
      switch (step.op) {
        case "put": {
          let errors: (OutflowError | null)[] = rows.map(() => null);
          try {
            await producer.put(...rows);
          } catch (e) {
            assert.ok(e instanceof PutError, String(e));
            errors = e.errors;
          }
          assert.deepStrictEqual(
            errors.map((e) => (e === null ? null : e.kind)),
            step.kinds,
            errors.map(String).join("; "),
          );
          break;
        }
        case "transact": {
          const own = ((step.own ?? []) as Json[]).map((o) => vectors.toSdk(sub(o, table)) as TransactWriteItem);
          let error: unknown = undefined;
          try {
            await producer.transact(rows, own);
          } catch (e) {
            error = e;
          }
          checkTx(step, error);
          break;
        }
        case "prepare":
          prepared.set(step.name as string, await producer.transactItems(rows));
          break;
        case "send": {
          const items = prepared.get(step.name as string);
          assert.ok(items !== undefined, `${step.name} was prepared`);
          let error: unknown = undefined;
          try {
            await db.send(new TransactWriteItemsCommand({ TransactItems: items }));
          } catch (e) {
            error = await producer.classify(e, items);
          }
          checkTx(step, error);
          break;
        }
        case "arm_conflict":
          await armConflict(url, table, step.key as string);
          break;
        case "settle_done":
          await settleDone(db, table, step.key as string, step.content as string);
          break;
        default:
          assert.fail(`unknown op ${String(step.op)}`);
      }
    }
    await checkTable(db, table, v.expect_table as Json[], (v.absent ?? []) as string[]);
  });
}

function vector(vs: Json[], name: string): Json {
  const found = vs.filter((v) => v.name === name);
  assert.equal(found.length, 1, name);
  return found[0];
}

live("a chain the Go producer began continues from TypeScript", async (db, table) => {
  // Interop: the first place of group order-42 is written with exactly the
  // items the Go producer gives for it (rows.json, which conformance_test.go
  // checks against Go), then TypeScript stages the next two rows one by one.
  const go = vector(vectors.load("rows.json"), "ordered route, empty group: place 1, no prev, the group item created");
  const put = go.items[0].Put;
  const update = go.items[1].Update;
  const updateSent = {
    TableName: table,
    Key: update.Key,
    ConditionExpression: "attribute_not_exists (#pk)",
    UpdateExpression: "SET #tail = :tail, #seq = :seq",
    ExpressionAttributeNames: { "#pk": "pk", "#tail": "tail", "#seq": "seq" },
    ExpressionAttributeValues: { ":tail": { S: "o-1" }, ":seq": { N: "1" } },
    ReturnValuesOnConditionCheckFailure: "ALL_OLD",
  };
  // The vector's expressions are resolved; sent with placeholders, they must resolve to the vector's again.
  assert.deepStrictEqual(vectors.shape({ Update: updateSent }).Update, { ...vectors.expectedShape(go.items[1]).Update, TableName: table });
  await db.send(new TransactWriteItemsCommand({ TransactItems: vectors.toSdk([{ Put: { ...put, TableName: table } }, { Update: updateSent }]) }));

  const producer = new Producer(db, { table, ordered: ["orders.fifo"] }, { traceParent: () => "" });
  const row2 = { key: "o-2", queue: "orders.fifo", group: "order-42", payload: "lines added", attributes: { type: "order.lines" } };
  assert.deepStrictEqual(await producer.put(row2), ["o-2"]);
  assert.deepStrictEqual(await producer.put({ key: "o-3", queue: "orders.fifo", group: "order-42", payload: "paid" }), ["o-3"]);

  const expect = vector(LIVE, "three rows of one ordered group, staged one by one").expect_table as Json[];
  const first = vectors.fromSdk(await getItem(db, table, "o-1"));
  assert.deepStrictEqual(first, put.Item, "Go's place 1, as Go writes it");
  vectors.checkVolatile(first, expect[0]);
  assert.deepStrictEqual(first, expect[0], "and as the live vector says");
  await checkTable(db, table, expect.slice(1), []);
});

live("put refuses invalid rows before sending", async (db, table) => {
  const producer = new Producer(db, { table, ordered: [] });
  await assert.rejects(
    producer.put({ queue: "orders", payload: "" }, { key: "ok-1", queue: "orders", payload: "x" }),
    (e: unknown) => {
      assert.ok(e instanceof PutError);
      assert.equal(e.kind, "empty_payload");
      assert.deepStrictEqual(e.errors.map((x) => x?.kind ?? null), ["empty_payload", null] satisfies (Kind | null)[]);
      assert.equal(e.keys[1], "ok-1");
      return true;
    },
  );
  assert.ok(await getItem(db, table, "ok-1"), "the valid row is staged");
});

live("fromPublished reads the dispatcher's configuration", async (db, table) => {
  await assert.rejects(Producer.fromPublished(db, table), (e: unknown) => e instanceof ConfigError && e.kind === "not_published");
  const item = vector(vectors.load("published.json"), "a published configuration fills an empty Config").item;
  await db.send(new PutItemCommand({ TableName: table, Item: vectors.toSdk(item) }));
  const producer = await Producer.fromPublished(db, table, {}, { traceParent: () => "" });
  assert.deepStrictEqual(await producer.put({ key: "f-1", queue: "orders.fifo", group: "g", payload: "x" }), ["f-1"]);
  const got = await getItem(db, table, "f-1");
  assert.deepStrictEqual(got.seq, { N: "1" }, "a published ordered route's row takes its place");
  await assert.rejects(
    producer.put({ key: "f-2", queue: "audit", payload: "x" }),
    (e: unknown) =>
      e instanceof PutError &&
      e.kind === "no_route" &&
      // The table and the routes published there, as outflow enqueue says it.
      e.message === `row 0: no such route: route "audit" is not one of the routes the dispatcher published in table ${table} (orders, orders.fifo)`,
  );
});

test("a table that does not exist is named", async (t) => {
  // A wrong table (or region, or endpoint) reads as that, naming the table
  // and where it was looked for, not as the SDK's bare "Requested resource
  // not found"; the error is still the SDK's, for code written for it.
  const db = suite.need(t);
  if (db === null) return;
  const missing = "outflow-nosuch-table";
  const want = `table "${missing}": not found in region us-east-1 at endpoint ${suite.moto?.url ?? ""} (ResourceNotFoundException)`;
  const named = (e: unknown) => e instanceof ResourceNotFoundException && e.message === want;
  await assert.rejects(Producer.fromPublished(db, missing), named);
  await assert.rejects(loadPublished(db, missing), named);
  const producer = new Producer(db, { table: missing });
  await assert.rejects(
    producer.put({ queue: "orders.fifo", group: "g", payload: "x" }),
    (e: unknown) => e instanceof PutError && e.kind === "order_unknown" && e.message.includes(want),
  );
});

for (const how of ["transact", "transactItems and classify"] as const) {
  live(`a group race says which call builds the items again: ${how}`, async (db, table) => {
    // transact builds the rows' items itself, so its caller calls it again;
    // a caller who sent transactItems' items in a transaction of its own
    // builds them again with transactItems.
    const config = { table, ordered: ["orders.fifo"] };
    const other = new Producer(db, config);
    // Another producer stages into the group just before each transaction is sent.
    const racing = {
      send: async (command: GetItemCommand | PutItemCommand | TransactWriteItemsCommand): Promise<never> => {
        if (command instanceof TransactWriteItemsCommand) await other.put({ queue: "orders.fifo", group: "g", payload: "first" });
        return (await db.send(command as GetItemCommand)) as never;
      },
    };
    const producer = new Producer(racing, config);
    const row = { key: "race-1", queue: "orders.fifo", group: "g", payload: "x" };
    let error: unknown;
    let want: string;
    if (how === "transact") {
      error = await producer.transact([row]).then(
        () => assert.fail("the race is lost"),
        (e: unknown) => e,
      );
      want = "another producer staged into the group first (call transact again: it builds the rows' items anew)";
    } else {
      const items = await producer.transactItems([row]);
      const sent = await racing.send(new TransactWriteItemsCommand({ TransactItems: items })).then(
        () => assert.fail("the race is lost"),
        (e: unknown) => e,
      );
      error = await producer.classify(sent, items);
      want = "another producer staged into the group first (build the row's items again with transactItems)";
    }
    assert.ok(error instanceof TransactError);
    assert.ok(error.has("group_race") && error.retryable);
    assert.ok(error.message.includes(`(tail of group "g" of orders.fifo): ${want}`), error.message);
  });
}
