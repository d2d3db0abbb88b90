/**
 * The receive loop on the project's patched moto server, where
 * poller.json leaves a behaviour unpinned: visibility renewed while a slow
 * effect runs, a long poll ended by the AbortSignal, failed SQS calls and
 * failed batch entries told to onFailure, a closing message with no closed
 * hook failed loudly, groups applied concurrently and each in order, a hook
 * that throws; and the receive loop of one's own the 1.0.0 README showed.
 * No timing assertions: each test waits on a condition, with a deadline
 * only for a hang (the suite runs on loaded two-core machines).
 */

import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { DeleteTableCommand, type DynamoDBClient, type TransactWriteItem } from "@aws-sdk/client-dynamodb";
import {
  ChangeMessageVisibilityBatchCommand,
  DeleteMessageBatchCommand,
  ReceiveMessageCommand,
  type ChangeMessageVisibilityBatchCommandOutput,
  type DeleteMessageBatchCommandOutput,
  type ReceiveMessageCommandOutput,
  type SQSClient,
} from "@aws-sdk/client-sqs";
import {
  Counts,
  Inbox,
  NoClosedHookError,
  Poller,
  applyMessage,
  fromQueue,
  type ApplyFunc,
  type PollerCallOptions,
  type PollerClient,
  type Result,
  type SQSMessageLike,
} from "../src/consume/index.js";
import { createQueue, deleteQueue, queueCounts, sendAsOutflow, sqsClient, until } from "./queues.js";
import { createInboxTable, liveSuite } from "./tables.js";

const suite = liveSuite();

type Command = ReceiveMessageCommand | DeleteMessageBatchCommand | ChangeMessageVisibilityBatchCommand;
type Output = ReceiveMessageCommandOutput | DeleteMessageBatchCommandOutput | ChangeMessageVisibilityBatchCommandOutput;

/**
 * The real client on moto, with each call seen first by intercept, which
 * may answer it instead (or throw): how a test makes an SQS call fail.
 */
class Wrapped implements PollerClient {
  constructor(
    private readonly inner: SQSClient,
    private readonly intercept: (command: Command, options: PollerCallOptions | undefined) => Promise<Output> | undefined,
  ) {}

  send(command: ReceiveMessageCommand, options?: PollerCallOptions): Promise<ReceiveMessageCommandOutput>;
  send(command: DeleteMessageBatchCommand, options?: PollerCallOptions): Promise<DeleteMessageBatchCommandOutput>;
  send(command: ChangeMessageVisibilityBatchCommand, options?: PollerCallOptions): Promise<ChangeMessageVisibilityBatchCommandOutput>;
  send(command: Command, options?: PollerCallOptions): Promise<Output> {
    const instead = this.intercept(command, options);
    if (instead !== undefined) return instead;
    return this.inner.send(command as ReceiveMessageCommand, options);
  }
}

/** A live test with an SQS client on moto and a queue (FIFO or standard), deleted after. */
function queueTest(name: string, fifo: boolean, run: (sqs: SQSClient, url: string) => Promise<void>): void {
  test(name, async (t) => {
    if (suite.need(t) === null) return;
    assert.ok(suite.moto !== null);
    const sqs = sqsClient(suite.moto);
    const url = await createQueue(sqs, "outflow-ts-poller-", fifo);
    try {
      await run(sqs, url);
    } finally {
      await deleteQueue(sqs, url);
      sqs.destroy();
    }
  });
}

/** queueTest with an inbox table too. */
function inboxQueueTest(name: string, fifo: boolean, run: (sqs: SQSClient, url: string, db: DynamoDBClient, table: string) => Promise<void>): void {
  queueTest(name, fifo, async (sqs, url) => {
    const db = suite.client;
    assert.ok(db !== null);
    const table = "outflow-ts-poller-" + randomBytes(6).toString("hex");
    await createInboxTable(db, table);
    try {
      await run(sqs, url, db, table);
    } finally {
      await db.send(new DeleteTableCommand({ TableName: table }));
    }
  });
}

/** Runs the poller until done holds (a deadline only for a hang), then stops it and waits for run. */
async function runUntil(poller: Poller, done: () => boolean, what: string, describe: () => string = () => ""): Promise<void> {
  const stop = new AbortController();
  const running = poller.run(stop.signal);
  try {
    await until(done, what, 120_000, describe);
  } finally {
    stop.abort();
    await running;
  }
}

queueTest("visibility is renewed every third of it while a slow effect runs: another consumer does not receive the message meanwhile", false, async (sqs, url) => {
  await sendAsOutflow(sqs, url, { key: "slow" });
  let renewals = 0;
  const client = new Wrapped(sqs, (command) => {
    if (command instanceof ChangeMessageVisibilityBatchCommand && command.input.Entries?.[0]?.VisibilityTimeout === 2) renewals++;
    return undefined;
  });
  const elsewhere: string[] = [];
  const counts = new Counts();
  const poller = new Poller({
    sqs: client,
    queueUrl: url,
    visibility: 2,
    wait: 1,
    onResult: counts.add,
    apply: async () => {
      // Over twice the visibility timeout: without renewals the message
      // would be visible again, and the other consumer would get it.
      const start = Date.now();
      while (Date.now() - start < 4500) {
        const got = await sqs.send(new ReceiveMessageCommand({ QueueUrl: url, WaitTimeSeconds: 1, MaxNumberOfMessages: 10 }));
        for (const m of got.Messages ?? []) elsewhere.push(m.MessageId ?? "");
      }
    },
  });
  await runUntil(poller, () => counts.total >= 1, "the slow message's result");
  assert.deepStrictEqual(elsewhere, [], "another consumer received the message while it was applied");
  assert.equal(counts.applied, 1);
  assert.ok(renewals >= 1, "its visibility was renewed");
  await until(async () => (await queueCounts(sqs, url)).inFlight + (await queueCounts(sqs, url)).visible === 0, "the message deleted");
});

queueTest("an abort during a long poll resolves run at once, leaving the poll to answer (review51.test.ts: what it takes is given back)", false, async (sqs, url) => {
  let given: AbortSignal | undefined;
  let receiving = false;
  const client = new Wrapped(sqs, (command, options) => {
    if (command instanceof ReceiveMessageCommand) {
      given = options?.abortSignal;
      receiving = true;
    }
    return undefined;
  });
  const poller = new Poller({ sqs: client, queueUrl: url, apply: () => {}, wait: 20 });
  const stop = new AbortController();
  const running = poller.run(stop.signal);
  await until(() => receiving, "the long poll to start");
  stop.abort();
  assert.equal(given, undefined, "the long poll is not aborted: SQS would serve it all the same, for nobody");
  // A bound for a hang, well under the 20 s the poll would otherwise wait.
  const ended = await Promise.race([running.then(() => "resolved"), sleep(15_000).then(() => "still polling")]);
  assert.equal(ended, "resolved");
});

queueTest("a failed receive is told to onFailure with no message id, and retried after a pause the abort ends", false, async (sqs, url) => {
  const missing = url.slice(0, url.lastIndexOf("/") + 1) + "no-such-queue-" + randomBytes(4).toString("hex");
  const failures: [string, unknown][] = [];
  const poller = new Poller({ sqs, queueUrl: missing, apply: () => assert.fail("nothing to apply"), wait: 1, onFailure: (id, e) => failures.push([id, e]) });
  await runUntil(poller, () => failures.length >= 2, "two failed receives");
  assert.equal(failures[0]?.[0], "");
  assert.match(String(failures[0]?.[1]), /^Error: receive: /);
});

inboxQueueTest("a failed delete is told to onFailure; the message comes again, and is a duplicate", false, async (sqs, url, db, table) => {
  await sendAsOutflow(sqs, url, { key: "k1" });
  let deletes = 0;
  const client = new Wrapped(sqs, (command) => {
    if (command instanceof DeleteMessageBatchCommand && deletes++ === 0) return Promise.reject(new Error("the network is down"));
    return undefined;
  });
  const failures: [string, unknown][] = [];
  const counts = new Counts();
  const effects: string[] = [];
  const inbox = new Inbox(db, table, "c1");
  const poller = inbox.poller(
    client,
    url,
    (m): TransactWriteItem[] => {
      effects.push(m.key);
      return [];
    },
    { visibility: 1, wait: 1, onResult: counts.add, onFailure: (id, e) => failures.push([id, e]) },
  );
  await runUntil(poller, () => counts.duplicate >= 1, "the message again, a duplicate", () => JSON.stringify(counts));
  assert.deepStrictEqual([counts.applied, counts.duplicate, counts.failed], [1, 1, 0]);
  assert.deepStrictEqual(effects, ["k1", "k1"], "the effect is asked again; the inbox commits it once");
  assert.equal(failures.length, 1);
  assert.equal(failures[0]?.[0], "");
  assert.match(String(failures[0]?.[1]), /delete: the network is down/);
  await until(async () => (await queueCounts(sqs, url)).visible + (await queueCounts(sqs, url)).inFlight === 0, "the queue empty");
});

queueTest("a batch entry that fails is told to onFailure by its message's id", false, async (sqs, url) => {
  const id = await sendAsOutflow(sqs, url, { key: "k1" });
  const client = new Wrapped(sqs, (command) => {
    if (command instanceof DeleteMessageBatchCommand) {
      return Promise.resolve({ $metadata: {}, Successful: [], Failed: [{ Id: "0", Code: "ReceiptHandleIsInvalid", Message: "stale", SenderFault: true }] });
    }
    return undefined;
  });
  const failures: [string, unknown][] = [];
  const counts = new Counts();
  const poller = new Poller({ sqs: client, queueUrl: url, apply: () => {}, wait: 1, onResult: counts.add, onFailure: (mid, e) => failures.push([mid, e]) });
  await runUntil(poller, () => failures.length >= 1, "the failed entry");
  assert.equal(counts.applied, 1);
  assert.equal(failures[0]?.[0], id);
  assert.match(String(failures[0]?.[1]), /delete: ReceiptHandleIsInvalid: stale/);
});

queueTest("a closing message with no closed hook is failed loudly: logged, counted, told to onFailure, its group's later message given back", true, async (sqs, url) => {
  await sendAsOutflow(sqs, url, { key: "a", group: "g", seq: 1 });
  await sendAsOutflow(sqs, url, { key: "b", group: "g", seq: 2, closed: "purged" });
  await sendAsOutflow(sqs, url, { key: "c", group: "g", seq: 3 });
  const results: Result[] = [];
  const failures: unknown[] = [];
  const logs: string[] = [];
  const metrics: string[] = [];
  const poller = new Poller({
    sqs,
    queueUrl: url,
    apply: () => {},
    wait: 1,
    onResult: (r) => results.push(r),
    onFailure: (_, e) => failures.push(e),
    log: (l) => logs.push(l),
    metrics: (l) => metrics.push(l),
  });
  await runUntil(poller, () => results.length >= 3, "three results");
  assert.deepStrictEqual(
    results.map((r) => `${r.message?.key}:${r.outcome}`),
    ["a:applied", "b:failed", "c:skipped"],
  );
  assert.ok(results[1]?.error instanceof NoClosedHookError);
  assert.deepStrictEqual(failures.length, 1);
  assert.ok(failures[0] instanceof NoClosedHookError);
  assert.equal(logs.length, 1);
  assert.match(logs[0] ?? "", /^ERROR .*no closed hook: queue=outflow-ts-poller-[0-9a-f]+\.fifo/);
  assert.equal(metrics.length, 1);
  assert.equal((JSON.parse(metrics[0] ?? "{}") as Record<string, unknown>)["ClosingMessagesWithoutHook"], 1);
  // The closing message is left to its visibility timeout; the one behind it is given back at once.
  assert.deepStrictEqual(await queueCounts(sqs, url), { visible: 1, inFlight: 1 });
});

queueTest("groups apply concurrently, each group's messages one at a time and in order", true, async (sqs, url) => {
  for (const g of ["g1", "g2"]) for (const seq of [1, 2, 3]) await sendAsOutflow(sqs, url, { key: `${g}-${seq}`, group: g, seq });
  const applied: string[] = [];
  const active = new Set<string>();
  const started = new Set<string>();
  let overlapped = false;
  const counts = new Counts();
  const poller = new Poller({
    sqs,
    queueUrl: url,
    concurrency: 2,
    wait: 1,
    onResult: counts.add,
    apply: async (m) => {
      assert.ok(!active.has(m.group), `two messages of ${m.group} at once`);
      active.add(m.group);
      started.add(m.group);
      if (m.key === "g1-1") {
        // Only another group applied meanwhile lets this one finish: the
        // groups run concurrently (a deadline for a hang if they do not).
        await until(() => started.has("g2"), "g2 applied while g1-1 is", 60_000);
        overlapped = true;
      }
      await sleep(1);
      applied.push(m.key);
      active.delete(m.group);
    },
  });
  await runUntil(poller, () => counts.total >= 6, "six results", () => JSON.stringify(counts));
  assert.ok(overlapped);
  assert.equal(counts.applied, 6);
  for (const g of ["g1", "g2"]) {
    assert.deepStrictEqual(
      applied.filter((k) => k.startsWith(g)),
      [`${g}-1`, `${g}-2`, `${g}-3`],
      `${g} in order`,
    );
  }
});

queueTest("a hook that throws rejects run with its error once its batch is settled: the messages applied are deleted", false, async (sqs, url) => {
  for (const k of ["a", "b"]) await sendAsOutflow(sqs, url, { key: k });
  const bug = new Error("a bug in onResult");
  const applied: string[] = [];
  const poller = new Poller({
    sqs,
    queueUrl: url,
    wait: 1,
    apply: (m) => void applied.push(m.key),
    onResult: () => {
      throw bug;
    },
  });
  const stop = new AbortController();
  const deadline = setTimeout(() => stop.abort(), 120_000);
  try {
    await assert.rejects(poller.run(stop.signal), (e) => e === bug);
  } finally {
    clearTimeout(deadline);
  }
  assert.ok(applied.length >= 1);
  // What was received was applied and deleted, or never received: nothing is left in flight.
  const left = await queueCounts(sqs, url);
  assert.equal(left.inFlight, 0, JSON.stringify(left));
  assert.equal(left.visible + applied.length, 2, JSON.stringify(left));
});

/** The receive loop the 1.0.0 README showed (its log line aside): a loop of one's own on applyMessage and fromQueue. */
async function consumeBatch(queueUrl: string, messages: readonly SQSMessageLike[], apply: ApplyFunc, closed: ApplyFunc): Promise<string[]> {
  const done: string[] = [];
  const failedGroups = new Set<string>();
  for (const message of messages) {
    const group = queueUrl.endsWith(".fifo") ? (message.Attributes?.MessageGroupId ?? "") : "";
    if (failedGroups.has(group)) continue; // behind its group's failure: it comes back, in order
    try {
      await applyMessage(fromQueue(queueUrl, message), apply, closed);
      done.push(message.ReceiptHandle ?? "");
    } catch {
      if (group !== "") failedGroups.add(group);
    }
  }
  return done;
}

inboxQueueTest("the 1.0.0 README's own receive loop (applyMessage, fromQueue, an Inbox used inside apply) still works", true, async (sqs, url, db, table) => {
  for (const m of [
    { key: "a", group: "g", seq: 1 },
    { key: "closes-2", group: "g", seq: 2, closed: "dead-letter" },
    { key: "c", group: "g", seq: 4 }, // a gap: place 3 has not come
  ]) {
    await sendAsOutflow(sqs, url, m);
  }
  const inbox = new Inbox(db, table, "c1");
  const applied: string[] = [];
  const apply: ApplyFunc = async (m) => {
    await inbox.apply(m, []);
    applied.push(m.key);
  };
  const received: SQSMessageLike[] = [];
  await until(
    async () => {
      const out = await sqs.send(
        new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1, MessageAttributeNames: ["All"], MessageSystemAttributeNames: ["MessageGroupId"] }),
      );
      received.push(...(out.Messages ?? []));
      return received.length >= 3;
    },
    "three messages",
  );
  const done = await consumeBatch(url, received, apply, (m) => inbox.close(m));
  assert.equal(done.length, 2, "a and the closing message are done; c waits for place 3");
  assert.deepStrictEqual(applied, ["a"]);
  const handles = new Set(done);
  assert.deepStrictEqual(
    received.filter((m) => handles.has(m.ReceiptHandle ?? "")).map((m) => m.MessageAttributes?.["outflow.key"]?.StringValue),
    ["a", "closes-2"],
  );
});
