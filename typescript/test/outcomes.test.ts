/**
 * What became of each message, counted (issue 51): a batch holding one of
 * each outcome gives those counts through Counts and the Handler's EMF
 * line; the classification every consumer shares; the Powertools record
 * handler's outcomes; the Poller's options as SQS takes them. Offline: the
 * receive loop on moto is poller.test.ts and poller-conformance.test.ts.
 */

import assert from "node:assert/strict";
import { test } from "node:test";
import type { ReceiveMessageCommand } from "@aws-sdk/client-sqs";
import {
  Counts,
  DecodeError,
  DuplicateError,
  Handler,
  LateError,
  MAX_VISIBILITY,
  NoClosedHookError,
  OUTCOMES,
  OrderError,
  Outcome,
  Poller,
  SkippedError,
  isDone,
  metricName,
  recordHandler,
  type LambdaSQSRecord,
  type Message,
  type PollerClient,
  type Result,
} from "../src/consume/index.js";

const FIFO = "arn:aws:sqs:us-east-1:123456789012:orders.fifo";

/** A Lambda record of a queue route's message: key, place seq of group, closed for a message closing a place. */
function record(id: string, key: string, group: string, seq: number, closed = ""): LambdaSQSRecord {
  const attr = (v: string) => ({ stringValue: v, dataType: "String" });
  const messageAttributes: Record<string, { stringValue: string; dataType: string }> = {
    "outflow.key": attr(key),
    "outflow.attempt": attr("1"),
    "outflow.seq": attr(String(seq)),
  };
  if (closed) messageAttributes["outflow.closed"] = attr(closed);
  return { messageId: id, receiptHandle: "r-" + id, body: key, attributes: { MessageGroupId: group }, messageAttributes, eventSourceARN: FIFO };
}

/** A batch with one of each outcome, and the apply and closed hooks that make them. */
const ONE_OF_EACH = {
  records: [
    record("1", "applied", "g1", 1),
    record("2", "closes", "g2", 2, "purged"),
    record("3", "dup", "g3", 1),
    record("4", "late", "g4", 1),
    record("5", "gap", "g5", 3),
    record("6", "behind-gap", "g5", 4), // skipped: its group met a gap
    { messageId: "7", body: "not Outflow's", attributes: { MessageGroupId: "g6" }, eventSourceARN: FIFO }, // failed: undecodable
  ],
  apply(m: Message): void {
    if (m.key === "dup") throw new DuplicateError("already applied");
    if (m.key === "late") throw new LateError("recorded late", new OrderError("late", "g4", 1, 2));
    if (m.key === "gap") throw new OrderError("gap", "g5", 3, 1);
  },
  closed(_m: Message): void {},
};

test("a batch holding one of each outcome gives those counts through Counts, onResult and the EMF line", async () => {
  const counts = new Counts();
  const results: Result[] = [];
  const metrics: string[] = [];
  const failed: string[] = [];
  const handler = new Handler(ONE_OF_EACH.apply, {
    closed: ONE_OF_EACH.closed,
    onResult: (r) => {
      results.push(r);
      counts.add(r);
    },
    onFailure: (id) => failed.push(id),
    metrics: (l) => void metrics.push(l),
  });
  const resp = await handler.handle({ Records: ONE_OF_EACH.records });
  for (const o of OUTCOMES) assert.equal(counts.of(o), 1, `${o}: ${JSON.stringify(counts)}`);
  assert.deepStrictEqual(
    { applied: counts.applied, closed: counts.closed, duplicate: counts.duplicate, late: counts.late, gap: counts.gap, failed: counts.failed, skipped: counts.skipped },
    { applied: 1, closed: 1, duplicate: 1, late: 1, gap: 1, failed: 1, skipped: 1 },
  );
  assert.equal(counts.total, 7);
  assert.deepStrictEqual(
    results.map((r) => r.outcome),
    ["applied", "closed", "duplicate", "late", "gap", "skipped", "failed"],
  );
  // What each result carries: the message (none when undecodable), and why (none when done by the effect).
  const by = new Map(results.map((r) => [r.messageId, r]));
  assert.equal(by.get("1")?.error, undefined);
  assert.equal(by.get("2")?.error, undefined);
  assert.equal(by.get("2")?.message?.closed, "purged");
  assert.ok(by.get("3")?.error instanceof DuplicateError);
  assert.ok(by.get("4")?.error instanceof LateError);
  assert.ok(by.get("5")?.error instanceof OrderError);
  assert.ok(by.get("6")?.error instanceof SkippedError);
  assert.equal(by.get("6")?.message?.key, "behind-gap", "a message skipped is reported with what it is");
  assert.ok(by.get("7")?.error instanceof DecodeError);
  assert.equal(by.get("7")?.message, undefined);
  // Only the messages not done are retried, and told to onFailure.
  assert.deepStrictEqual(resp.batchItemFailures, [{ itemIdentifier: "5" }, { itemIdentifier: "6" }, { itemIdentifier: "7" }]);
  assert.deepStrictEqual(failed, ["5", "6", "7"]);
  // One EMF line for the batch, every metric in it.
  assert.equal(metrics.length, 1);
  const doc = JSON.parse(metrics[0] ?? "{}") as Record<string, unknown> & { _aws: { CloudWatchMetrics: { Namespace: string; Dimensions: string[][]; Metrics: unknown[] }[] } };
  assert.equal(doc["Queue"], "orders.fifo");
  assert.deepStrictEqual(doc._aws.CloudWatchMetrics, [
    {
      Namespace: "Outflow/Consumer",
      Dimensions: [["Queue"]],
      Metrics: ["Applied", "Closed", "Duplicate", "Late", "Gap", "Failed", "Skipped"].map((Name) => ({ Name, Unit: "Count" })),
    },
  ]);
  for (const name of ["Applied", "Closed", "Duplicate", "Late", "Gap", "Failed", "Skipped"]) assert.equal(doc[name], 1, name);
  assert.ok(!JSON.stringify(doc).includes("not Outflow's"), "no payload in a metric line");
});

test("Counts.add is bound, so onResult: counts.add works; an outcome it does not know counts as failed", () => {
  const counts = new Counts();
  const { add } = counts;
  add({ messageId: "1", outcome: Outcome.Applied });
  add({ messageId: "2", outcome: "surprise" as Outcome });
  assert.equal(counts.applied, 1);
  assert.equal(counts.failed, 1);
  assert.equal(counts.total, 2);
  assert.equal(counts.of("surprise" as Outcome), 0);
});

test("the outcomes, their metrics, and which are done", () => {
  assert.deepStrictEqual([...OUTCOMES], ["applied", "closed", "duplicate", "late", "gap", "failed", "skipped"]);
  assert.deepStrictEqual(
    OUTCOMES.filter((o) => isDone(o)),
    ["applied", "closed", "duplicate", "late"],
  );
  assert.deepStrictEqual(OUTCOMES.map(metricName), ["Applied", "Closed", "Duplicate", "Late", "Gap", "Failed", "Skipped"]);
  assert.ok(Object.isFrozen(OUTCOMES));
});

test("a closing message with no closed hook is failed loudly, and its group skipped; an empty batch writes no line", async () => {
  const counts = new Counts();
  const metrics: string[] = [];
  const logs: string[] = [];
  const h = new Handler(() => {}, { onResult: counts.add, metrics: (l) => void metrics.push(l), log: (l) => void logs.push(l) });
  const resp = await h.handle({ Records: [record("1", "a", "g", 1), record("2", "b", "g", 2, "purged"), record("3", "c", "g", 3)] });
  assert.deepStrictEqual(resp.batchItemFailures, [{ itemIdentifier: "2" }, { itemIdentifier: "3" }]);
  assert.deepStrictEqual([counts.applied, counts.failed, counts.skipped], [1, 1, 1]);
  assert.equal(logs.length, 1);
  const docs = metrics.map((l) => JSON.parse(l) as Record<string, unknown>);
  assert.deepStrictEqual(
    docs.map((d) => ("Applied" in d ? "batch" : "ClosingMessagesWithoutHook" in d ? "no hook" : "?")),
    ["no hook", "batch"],
  );
  metrics.length = 0;
  await h.handle({ Records: [] });
  assert.deepStrictEqual(metrics, []);
});

test("out of time, a message not started is skipped", async () => {
  const counts = new Counts();
  const h = new Handler(() => {}, { onResult: counts.add, metrics: () => {}, reserveMs: 1000 });
  await h.handle({ Records: [record("1", "a", "g1", 1), record("2", "x", "g2", 1)] }, { getRemainingTimeInMillis: () => 10 });
  assert.deepStrictEqual([counts.applied, counts.skipped], [0, 2]);
});

test("recordHandler: done outcomes resolve, the others reject to Powertools with their error; a closing message with no hook fails loudly", async () => {
  const counts = new Counts();
  const logs: string[] = [];
  const metrics: string[] = [];
  const withHook = recordHandler(ONE_OF_EACH.apply, { closed: ONE_OF_EACH.closed, onResult: counts.add });
  for (const r of ONE_OF_EACH.records.slice(0, 4)) await withHook(r);
  await assert.rejects(withHook(ONE_OF_EACH.records[4] as LambdaSQSRecord), OrderError);
  await assert.rejects(withHook(ONE_OF_EACH.records[6] as LambdaSQSRecord), DecodeError);
  assert.deepStrictEqual([counts.applied, counts.closed, counts.duplicate, counts.late, counts.gap, counts.failed, counts.skipped], [1, 1, 1, 1, 1, 1, 0]);
  const noHook = recordHandler(() => {}, { log: (l) => void logs.push(l), metrics: (l) => void metrics.push(l) });
  await assert.rejects(noHook(record("9", "k", "g", 2, "dead-letter")), NoClosedHookError);
  assert.equal(logs.length, 1);
  assert.match(metrics[0] ?? "", /"ClosingMessagesWithoutHook":1/);
  assert.throws(() => recordHandler(undefined as unknown as () => void), TypeError);
});

/** A client that records each ReceiveMessage input and returns nothing; its onReceive may stop the poller. */
class RecordingClient {
  readonly inputs: ReceiveMessageCommand["input"][] = [];
  constructor(private readonly onReceive: () => void) {}
  async send(command: { input: unknown }): Promise<{ Messages: [] }> {
    this.inputs.push(command.input as ReceiveMessageCommand["input"]);
    this.onReceive();
    return { Messages: [] };
  }
}

test("Poller: what it asks SQS for; waits and visibility in whole seconds, rounded up; over 12 hours refused at construction", async () => {
  const stop = new AbortController();
  const client = new RecordingClient(() => stop.abort());
  const poller = new Poller({ sqs: client as unknown as PollerClient, queueUrl: "https://sqs.us-east-1.amazonaws.com/123456789012/q.fifo", apply: () => {}, wait: 0.3, visibility: 1.5 });
  assert.deepStrictEqual([poller.wait, poller.visibility, poller.concurrency], [1, 2, 4]);
  await poller.run(stop.signal);
  assert.deepStrictEqual(client.inputs, [
    {
      QueueUrl: "https://sqs.us-east-1.amazonaws.com/123456789012/q.fifo",
      MaxNumberOfMessages: 10,
      WaitTimeSeconds: 1,
      VisibilityTimeout: 2,
      MessageAttributeNames: ["All"],
      MessageSystemAttributeNames: ["MessageGroupId", "SequenceNumber"],
    },
  ]);
  const base = { sqs: client as unknown as PollerClient, queueUrl: "q", apply: () => {} };
  assert.deepStrictEqual([new Poller(base).wait, new Poller(base).visibility], [20, 30], "the defaults");
  assert.equal(new Poller({ ...base, wait: 90 }).wait, 20, "SQS's longest poll");
  assert.equal(new Poller({ ...base, visibility: MAX_VISIBILITY }).visibility, 43_200);
  assert.throws(() => new Poller({ ...base, visibility: MAX_VISIBILITY + 1 }), RangeError);
  assert.throws(() => new Poller({ ...base, queueUrl: "" }), TypeError);
  assert.throws(() => new Poller({ ...base, apply: undefined as unknown as () => void }), TypeError);
  assert.throws(() => new Poller({ ...base, sqs: {} as PollerClient }), TypeError);
  // One loop at a time.
  const longPoll = {
    // A long poll that ends only with the run's signal, as the SDK's call does.
    send: (_command: unknown, options?: { abortSignal?: AbortSignal }) =>
      new Promise((_, reject) => options?.abortSignal?.addEventListener("abort", () => reject(new Error("aborted")), { once: true })),
  };
  const twice = new Poller({ ...base, sqs: longPoll as unknown as PollerClient });
  const halt = new AbortController();
  const first = twice.run(halt.signal);
  await assert.rejects(twice.run(halt.signal), /running already/);
  halt.abort();
  await first;
  // Stopped before it starts: not one receive.
  const idle = new RecordingClient(() => {});
  await new Poller({ ...base, sqs: idle as unknown as PollerClient }).run(AbortSignal.abort());
  assert.deepStrictEqual(idle.inputs, []);
});
