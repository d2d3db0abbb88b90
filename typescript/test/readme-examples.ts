/**
 * Every ```ts block of a README (typescript/README.md), as tests: compiled
 * with tsc (strict: a README that no longer type-checks fails), run
 * against the project's moto server, in order, as an adopter would run
 * them; then what each did is checked: the rows the producer example
 * staged, the inbox table the recipe made, the consumer's service run on a
 * moto queue until it applied what was sent and then stopped by its
 * SIGTERM listener, its Lambda handler and its Powertools handler given
 * batches as Lambda gives them. A block whose first line is `// name.ts`
 * is written as that file (the consumer's blocks import ./ledger.js); the
 * others as blockN.ts.
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
  type GetItemCommandOutput,
  ScanCommand,
  type DynamoDBClient,
} from "@aws-sdk/client-dynamodb";
import type { BatchResponse, Counts, LambdaSQSEvent } from "../src/consume/index.js";
import { createQueue, deleteQueue, queueCounts, sendAsOutflow, sqsClient, until } from "./queues.js";
import { createInboxTable, createOutboxTable, liveSuite } from "./tables.js";
import { PRODUCER, toSdk, type Json } from "./vectors.js";

/** A ```ts block of a README: its file's name (without .ts) and its code. */
export interface Block {
  name: string;
  code: string;
}

/** The ```ts blocks of a README, in order: named by a first line `// name.ts`, else blockN. */
export function blocks(markdown: string): Block[] {
  return [...markdown.matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((m, i) => {
    const code = m[1] as string;
    const named = /^\/\/ ([A-Za-z][A-Za-z0-9_-]*)\.ts\n/.exec(code);
    return { name: named?.[1] ?? `block${i + 1}`, code };
  });
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

  test("the README has its examples: the producer, the inbox table, the consumer's ledger, service, Lambda and Powertools handlers", () => {
    // A block dropped or its fence renamed would go unchecked: count them.
    assert.equal(BLOCKS.length, 6, `${options.readme} has ${BLOCKS.length} ts blocks`);
    assert.deepStrictEqual(
      BLOCKS.map((b) => b.name),
      ["block1", "block2", "ledger", "service", "lambda", "powertools"],
    );
  });

  let dir = "";

  before(() => {
    dir = options.makeDir();
  });

  after(() => {
    if (dir !== "" && !process.env["OUTFLOW_KEEP_README"]) rmSync(dir, { recursive: true, force: true });
  });

  /** The compiled blocks' paths by name; compiling them is the first test, and the others need it. */
  let compiled: Map<string, string> | null = null;

  test("the README's examples compile with tsc --strict", () => {
    const names = BLOCKS.map(({ name, code }) => {
      writeFileSync(join(dir, name + ".ts"), code);
      return name;
    });
    const config = { compilerOptions: { ...NODENEXT, rootDir: ".", outDir: "out" }, include: ["*.ts"] };
    writeFileSync(join(dir, "tsconfig.json"), JSON.stringify(config, null, 2));
    tsc(options, dir, "tsconfig.json", "NodeNext");
    compiled = new Map(names.map((n) => [n, join(dir, "out", n + ".js")]));
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

  /** Runs a compiled block, as `node name.js` would: its top level, once; its exports. */
  async function runBlock(name: string): Promise<Record<string, unknown>> {
    assert.ok(compiled !== null, "the blocks compiled");
    const path = compiled.get(name);
    assert.ok(path !== undefined, `block ${name} exists`);
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
      await runBlock("block1");
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
      await runBlock("block2");
      const ttl = await db.send(new DescribeTimeToLiveCommand({ TableName: "ledger-inbox" }));
      assert.equal(ttl.TimeToLiveDescription?.AttributeName, "expires_at");
      assert.equal(ttl.TimeToLiveDescription?.TimeToLiveStatus, "ENABLED");
    });

    await createInboxTable(db, "ledger"); // the consumer's own table, where its effect goes
    const ledger = await runBlock("ledger");
    assert.equal(typeof ledger["effect"], "function", "the ledger exports its effect");
    if (options.checkConsumer) await options.checkConsumer(dir, ledger);

    await t.test("the service applies what reaches its queue, each group in order, until SIGTERM stops it", async (st) => {
      assert.ok(suite.moto !== null);
      const logged = st.mock.method(console, "log", () => {});
      const warned = st.mock.method(console, "warn", () => {});
      const sqs = sqsClient(suite.moto);
      const url = await createQueue(sqs, "ledger-", true);
      try {
        // The service's SQSClient finds moto as the DynamoDB client does, and its queue by LEDGER_QUEUE_URL.
        process.env["AWS_ENDPOINT_URL_SQS"] = suite.moto.url;
        process.env["LEDGER_QUEUE_URL"] = url;
        const amount = (n: number) => JSON.stringify({ amount: n });
        for (const m of [
          { key: "a", group: "acct-1", seq: 1, body: amount(5) },
          { key: "b", group: "acct-1", seq: 2, body: amount(7) },
          { key: "c", group: "acct-1", seq: 3, body: amount(11) },
          { key: "d", group: "acct-2", seq: 1, body: amount(100) },
          { key: "closes-2", group: "acct-2", seq: 2, closed: "purged", body: "{}" }, // a place that will not come
          { key: "f", group: "acct-2", seq: 3, body: amount(1000) },
          { key: "a", group: "acct-1", seq: 1, body: amount(5), dedup: "a-again" }, // a copy: a duplicate
        ]) {
          await sendAsOutflow(sqs, url, m);
        }
        const before = new Set(process.listeners("SIGTERM"));
        let failed: unknown = undefined;
        const running = runBlock("service");
        running.catch((e: unknown) => {
          failed = e;
        });
        const check = () => {
          if (failed !== undefined) throw failed;
        };
        let listener: ((signal: NodeJS.Signals) => void) | undefined;
        await until(() => {
          check();
          listener = process.listeners("SIGTERM").find((l) => !before.has(l));
          return listener !== undefined;
        }, "the service's SIGTERM listener");
        await until(async () => {
          check();
          const left = await queueCounts(sqs, url);
          return (await balance(db)) === 1123 && left.visible + left.inFlight === 0;
        }, "the service to apply every message and delete it");
        // What a container's stop sends: the listener the block added, called as a signal would.
        assert.ok(listener !== undefined);
        process.removeListener("SIGTERM", listener);
        listener("SIGTERM");
        const service = await running;
        const counts = service["counts"] as Counts;
        assert.deepStrictEqual(
          [counts.applied, counts.closed, counts.duplicate, counts.late, counts.gap, counts.failed, counts.skipped],
          [5, 1, 1, 0, 0, 0, 0],
        );
        assert.equal(await balance(db), 1123, "each amount once");
        for (const group of ["acct-1", "acct-2"]) {
          const got: GetItemCommandOutput = await db.send(
            new GetItemCommand({ TableName: "ledger-inbox", Key: { pk: { S: `cursor billing ${group}` } }, ConsistentRead: true }),
          );
          assert.deepStrictEqual(got.Item?.["seq"], { N: "3" }, `${group} applied in order, past its closed place`);
        }
        assert.match(String(logged.mock.calls.at(-1)?.arguments[0]), /^stopped: \{"applied":5,/);
        assert.equal(warned.mock.callCount(), 0);
      } finally {
        await deleteQueue(sqs, url);
        sqs.destroy();
      }
    });

    await t.test("the Lambda handler applies each message once, a FIFO group in order", async () => {
      const handler = (await runBlock("lambda"))["handler"] as (event: LambdaSQSEvent) => Promise<BatchResponse>;
      assert.equal(typeof handler, "function", "the Lambda block exports its handler");
      const start = await balance(db);
      const fifo = "arn:aws:sqs:us-east-1:123456789012:ledger.fifo";
      const a = lambdaRecord("1", "la", 5, fifo, "acct-3", 1);
      const b = lambdaRecord("2", "lb", 7, fifo, "acct-3", 2);
      const c = lambdaRecord("3", "lc", 11, fifo, "acct-3", 3);
      // c's place before b's: a gap, reported with its group's later messages.
      let resp = await handler({ Records: [a, c, b] });
      assert.deepStrictEqual(resp.batchItemFailures, [{ itemIdentifier: "3" }, { itemIdentifier: "2" }]);
      assert.equal(await balance(db), start + 5);
      // The redelivery: a is a duplicate (done), b and c apply in turn.
      resp = await handler({ Records: [a, b, c] });
      assert.deepStrictEqual(resp.batchItemFailures, []);
      assert.equal(await balance(db), start + 23);
      const cursor = await db.send(new GetItemCommand({ TableName: "ledger-inbox", Key: { pk: { S: "cursor billing acct-3" } }, ConsistentRead: true }));
      assert.deepStrictEqual(cursor.Item?.["seq"], { N: "3" });
    });

    await t.test("the Powertools handler applies a FIFO batch with the processor, a closing message closing its place", async () => {
      const handler = (await runBlock("powertools"))["handler"] as (event: LambdaSQSEvent, context: unknown) => Promise<BatchResponse>;
      assert.equal(typeof handler, "function", "the Powertools block exports its handler");
      const start = await balance(db);
      const fifo = "arn:aws:sqs:us-east-1:123456789012:ledger.fifo";
      const closing = lambdaRecord("22", "pclose", 0, fifo, "acct-4", 2);
      (closing["messageAttributes"] as Json)["outflow.closed"] = { stringValue: "purged", dataType: "String" };
      const records = [
        lambdaRecord("21", "p1", 1, fifo, "acct-4", 1),
        closing,
        lambdaRecord("23", "p3", 2, fifo, "acct-4", 3),
        lambdaRecord("24", "q2", 1000, fifo, "acct-5", 2), // a gap: acct-5's first place has not come
      ];
      const resp = await handler({ Records: records }, {});
      assert.deepStrictEqual(resp.batchItemFailures, [{ itemIdentifier: "24" }]);
      assert.equal(await balance(db), start + 3);
      const cursor = await db.send(new GetItemCommand({ TableName: "ledger-inbox", Key: { pk: { S: "cursor billing acct-4" } }, ConsistentRead: true }));
      assert.deepStrictEqual(cursor.Item?.["seq"], { N: "3" });
    });
  });
}
