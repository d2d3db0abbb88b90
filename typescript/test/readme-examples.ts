/**
 * Every ```ts block of a README (typescript/README.md), as tests: compiled
 * with tsc (strict: a README that no longer type-checks fails), run
 * against the project's moto server, in order, as an adopter would run
 * them; then what each did is checked: the rows the producer example
 * staged, the inbox table the recipe made, the consumer's handler and
 * receive loop applied to messages as SQS gives them.
 *
 * Two test files register them: readme.test.ts, with the blocks under
 * typescript/dist/ (the package imports itself by name), and
 * artifact.test.ts, with the blocks in a fresh npm project outside the
 * checkout that installed the packed tarball
 * (scripts/artifact-test-typescript.sh). The blocks import the package by
 * its name (@outflowhq/outflow and /consume), so where they are written
 * decides what they load: Node and tsc resolve a bare name from the
 * importing file's folder up.
 */

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { pathToFileURL } from "node:url";
import {
  CreateTableCommand,
  DescribeTimeToLiveCommand,
  GetItemCommand,
  PutItemCommand,
  ScanCommand,
  type DynamoDBClient,
} from "@aws-sdk/client-dynamodb";
import type { ApplyFunc, BatchResponse, Inbox, LambdaSQSEvent, SQSMessageLike } from "../src/consume/index.js";
import { createInboxTable, createOutboxTable, liveSuite } from "./tables.js";
import { PRODUCER, toSdk, type Json } from "./vectors.js";

/** The ```ts blocks of a README, in order. */
export function blocks(markdown: string): string[] {
  return [...markdown.matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((m) => m[1] as string);
}

/** The compiler options the blocks are compiled with: an adopter's Node project (with @types/node), strict. */
export const NODENEXT = {
  target: "ES2022",
  lib: ["ES2022"],
  module: "NodeNext",
  moduleResolution: "NodeNext",
  types: ["node"],
  strict: true,
  noUncheckedIndexedAccess: true,
  skipLibCheck: true,
} as const;

export interface ExamplesOptions {
  /** The README whose blocks are run. */
  readme: string;
  /** Makes the (new, empty) directory the blocks are written into, before the tests; removed after them, unless OUTFLOW_KEEP_README is set. */
  makeDir(): string;
  /** The tsc that compiles them. */
  tsc: string;
  /**
   * More compiler options to type-check the blocks with besides NodeNext's
   * (tsc --noEmit), by name: an adopter's bundler project, say.
   */
  typecheck?: Record<string, Record<string, unknown>>;
  /** Checked on the files each tsc run read (tsc --listFiles): where the package's types came from. */
  checkTypes?(files: string[], name: string): void;
  /** Checked once the consumer block has run, with its exports: where its imports came from. */
  checkConsumer?(dir: string, exports: Record<string, unknown>): Promise<void>;
}

/** A Lambda record of a queue route's message with payload {"amount": amount}. */
function lambdaRecord(id: string, key: string, amount: number, queueArn: string, group = "", seq = 0): Json {
  const attrs: Json = {
    "outflow.key": { stringValue: key, dataType: "String" },
    "outflow.attempt": { stringValue: "1", dataType: "Number" },
  };
  if (seq > 0) attrs["outflow.seq"] = { stringValue: String(seq), dataType: "Number" };
  return {
    messageId: id,
    receiptHandle: "r-" + id,
    body: JSON.stringify({ amount }),
    attributes: group ? { MessageGroupId: group, ApproximateReceiveCount: "1" } : { ApproximateReceiveCount: "1" },
    messageAttributes: attrs,
    eventSource: "aws:sqs",
    eventSourceARN: queueArn,
    awsRegion: "us-east-1",
  };
}

/** The same message as @aws-sdk/client-sqs's ReceiveMessage gives it. */
function sdkMessage(r: Json): SQSMessageLike {
  const attrs: Record<string, { StringValue: string; DataType: string }> = {};
  for (const [k, v] of Object.entries(r.messageAttributes as Record<string, Json>)) attrs[k] = { StringValue: v.stringValue, DataType: v.dataType };
  return { MessageId: r.messageId, ReceiptHandle: r.receiptHandle, Body: r.body, Attributes: r.attributes, MessageAttributes: attrs };
}

async function balance(db: DynamoDBClient): Promise<number> {
  const out = await db.send(new GetItemCommand({ TableName: "ledger", Key: { pk: { S: "balance" } }, ConsistentRead: true }));
  return Number(out.Item?.["total"]?.N ?? "0");
}

/** tsc -p dir/config --listFiles, then checkTypes on the files it read; a failure shows its output. */
function tsc(options: ExamplesOptions, dir: string, config: string, name: string): void {
  const run = spawnSync(options.tsc, ["-p", join(dir, config), "--listFiles"], { encoding: "utf8", timeout: 120_000 });
  assert.equal(run.status, 0, `tsc (${name}) on the README's blocks (in ${dir}):\n${run.stdout}${run.stderr}${run.error ?? ""}`);
  const files = run.stdout.split("\n").filter((l) => l.endsWith(".ts"));
  options.checkTypes?.(files, name);
}

/** Registers the README's tests: its blocks counted, compiled, type-checked, run on moto. */
export function readmeExamples(options: ExamplesOptions): void {
  const BLOCKS = blocks(readFileSync(options.readme, "utf8"));

  test("the README has its examples: the producer, the inbox table, the consumer, the receive loop", () => {
    // A block dropped or its fence renamed would go unchecked: count them.
    assert.equal(BLOCKS.length, 4, `${options.readme} has ${BLOCKS.length} ts blocks`);
  });

  let dir = "";

  before(() => {
    dir = options.makeDir();
  });

  after(() => {
    if (dir !== "" && !process.env["OUTFLOW_KEEP_README"]) rmSync(dir, { recursive: true, force: true });
  });

  /** The compiled blocks' paths; compiling them is the first test, and the others need it. */
  let compiled: string[] | null = null;

  test("the README's examples compile with tsc --strict", () => {
    const names = BLOCKS.map((code, i) => {
      const name = `block${i + 1}`;
      writeFileSync(join(dir, name + ".ts"), code);
      return name;
    });
    const config = { compilerOptions: { ...NODENEXT, rootDir: ".", outDir: "out" }, include: ["*.ts"] };
    writeFileSync(join(dir, "tsconfig.json"), JSON.stringify(config, null, 2));
    tsc(options, dir, "tsconfig.json", "NodeNext");
    compiled = names.map((n) => join(dir, "out", n + ".js"));
  });

  for (const [name, compilerOptions] of Object.entries(options.typecheck ?? {})) {
    test(`the README's examples type-check with tsc --strict, ${name}`, () => {
      const file = `tsconfig.${name}.json`;
      const config = { compilerOptions: { ...NODENEXT, ...compilerOptions, noEmit: true }, include: ["*.ts"] };
      writeFileSync(join(dir, file), JSON.stringify(config, null, 2));
      tsc(options, dir, file, name);
    });
  }

  const suite = liveSuite();

  /** Runs a compiled block, as `node block.js` would: its top level, once; its exports. */
  async function runBlock(i: number): Promise<Record<string, unknown>> {
    assert.ok(compiled !== null, "the blocks compiled");
    const path = compiled[i];
    assert.ok(path !== undefined, `block ${i + 1} exists`);
    return (await import(pathToFileURL(path).href)) as Record<string, unknown>;
  }

  test("the README's examples run against moto, and do what they say", async (t) => {
    const db = suite.need(t);
    if (db === null) return;
    assert.ok(suite.moto !== null);
    // The blocks make their clients as an adopter's code does (new DynamoDBClient({})):
    // the SDK's own variables point them at moto. This file runs in its own process.
    process.env["AWS_ENDPOINT_URL_DYNAMODB"] = suite.moto.url;
    process.env["AWS_REGION"] = "us-east-1";
    process.env["AWS_ACCESS_KEY_ID"] = "test";
    process.env["AWS_SECRET_ACCESS_KEY"] = "test";

    await t.test("the producer stages its rows in the dispatcher's table", async () => {
      // What the dispatcher would have made: the outbox table, its published
      // configuration (the vectors' one, with an "audit" route for put's
      // example), and the application's own "orders" table.
      await createOutboxTable(db, "outbox");
      const published = (JSON.parse(readFileSync(PRODUCER + "published.json", "utf8")).vectors as Json[]).find(
        (v) => v.name === "a published configuration fills an empty Config",
      );
      assert.ok(published, "published.json's configuration");
      const item = structuredClone(published.item);
      item.routes.M.audit = { S: "https://sqs.us-east-1.amazonaws.com/123456789012/audit" };
      await db.send(new PutItemCommand({ TableName: "outbox", Item: toSdk(item) }));
      // The application's table the example writes an order into, keyed by id.
      await db.send(
        new CreateTableCommand({
          TableName: "orders",
          BillingMode: "PAY_PER_REQUEST",
          KeySchema: [{ AttributeName: "id", KeyType: "HASH" }],
          AttributeDefinitions: [{ AttributeName: "id", AttributeType: "S" }],
        }),
      );
      await runBlock(0);
      const staged = (await db.send(new ScanCommand({ TableName: "outbox", ConsistentRead: true }))).Items ?? [];
      const rows = staged.filter((i) => i["queue"] !== undefined);
      const byKey = new Map(rows.map((i) => [i["pk"]?.S, i]));
      assert.deepStrictEqual(byKey.get("order-42-created")?.["queue"], { S: "orders" });
      assert.deepStrictEqual(byKey.get("order-43-created")?.["seq"], { N: "1" });
      assert.deepStrictEqual(byKey.get("order-43-paid")?.["seq"], { N: "2" });
      assert.equal(rows.filter((i) => i["queue"]?.S === "audit").length, 2, "put's two audit rows");
      assert.equal(rows.length, 5);
      const orders = (await db.send(new ScanCommand({ TableName: "orders", ConsistentRead: true }))).Items ?? [];
      assert.deepStrictEqual(orders.map((o) => o["id"]?.S).sort(), ["42", "43"], "the orders written with their rows");
    });

    await t.test("the inbox table recipe makes the table, TTL on expires_at", async () => {
      await runBlock(1);
      const ttl = await db.send(new DescribeTimeToLiveCommand({ TableName: "ledger-inbox" }));
      assert.equal(ttl.TimeToLiveDescription?.AttributeName, "expires_at");
      assert.equal(ttl.TimeToLiveDescription?.TimeToLiveStatus, "ENABLED");
    });

    await createInboxTable(db, "ledger"); // the consumer's own table, where its effect goes
    const consumer = await runBlock(2);
    const handler = consumer["handler"] as (event: LambdaSQSEvent) => Promise<BatchResponse>;
    const apply = consumer["apply"] as ApplyFunc;
    const inbox = consumer["inbox"] as Inbox;
    assert.equal(typeof handler, "function", "the consumer exports its handler");
    if (options.checkConsumer) await options.checkConsumer(dir, consumer);

    await t.test("the Lambda handler applies each message once, a FIFO group in order", async () => {
      const fifo = "arn:aws:sqs:us-east-1:123456789012:ledger.fifo";
      const a = lambdaRecord("1", "a", 5, fifo, "acct-1", 1);
      const b = lambdaRecord("2", "b", 7, fifo, "acct-1", 2);
      const c = lambdaRecord("3", "c", 11, fifo, "acct-1", 3);
      // c's place before b's: a gap, reported with its group's later messages.
      let resp = await handler({ Records: [a, c, b] });
      assert.deepStrictEqual(resp.batchItemFailures, [{ itemIdentifier: "3" }, { itemIdentifier: "2" }]);
      assert.equal(await balance(db), 5);
      // The redelivery: a is a duplicate (done), b and c apply in turn.
      resp = await handler({ Records: [a, b, c] });
      assert.deepStrictEqual(resp.batchItemFailures, []);
      assert.equal(await balance(db), 23);
      const cursor = await db.send(new GetItemCommand({ TableName: "ledger-inbox", Key: { pk: { S: "cursor billing acct-1" } }, ConsistentRead: true }));
      assert.deepStrictEqual(cursor.Item?.["seq"], { N: "3" });
    });

    await t.test("the receive loop applies a batch and says which messages to delete", async (st) => {
      const logged = st.mock.method(console, "error", () => {});
      const url = "https://sqs.us-east-1.amazonaws.com/123456789012/ledger.fifo";
      const arn = "arn:aws:sqs:us-east-1:123456789012:ledger.fifo";
      const consumeBatch = (await runBlock(3))["consumeBatch"] as (
        url: string,
        messages: readonly SQSMessageLike[],
        apply: ApplyFunc,
        closed: ApplyFunc,
      ) => Promise<string[]>;
      const batch = [
        lambdaRecord("10", "d", 100, arn, "acct-2", 1),
        lambdaRecord("11", "f", 1000, arn, "acct-2", 3), // a gap: left, and its group's later messages too
        lambdaRecord("12", "e", 10, arn, "acct-2", 2),
        lambdaRecord("13", "x", 1, arn, "acct-3", 1),
        lambdaRecord("14", "a", 5, arn, "acct-1", 1), // a copy of a message applied above: done, deleted
      ].map(sdkMessage);
      const done = await consumeBatch(url, batch, apply, (m) => inbox.close(m));
      assert.deepStrictEqual(done, ["r-10", "r-13", "r-14"]);
      assert.equal(await balance(db), 23 + 100 + 1);
      // The failure is logged; the messages behind it in its group are left unread.
      assert.deepStrictEqual(
        logged.mock.calls.map((c) => String(c.arguments[0]).replace(/:.*/s, "")),
        ["message 11"],
      );
    });
  });
}
