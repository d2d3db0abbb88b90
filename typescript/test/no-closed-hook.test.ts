/**
 * A consumer wired to the first recipe (an Inbox used inside apply, no
 * closed hook) meeting a closing message: never acknowledged unread in
 * silence, but reported failed, logged at ERROR and counted. Offline.
 */

import assert from "node:assert/strict";
import { test } from "node:test";
import { Handler, METRIC_NO_CLOSED_HOOK, NoClosedHookError, ackClosed, type Message } from "../src/consume/index.js";

function record(key: string, seq: number, closed = "") {
  const messageAttributes: Record<string, { stringValue: string; dataType: string }> = {
    "outflow.key": { stringValue: key, dataType: "String" },
    "outflow.attempt": { stringValue: "1", dataType: "Number" },
    "outflow.seq": { stringValue: String(seq), dataType: "Number" },
  };
  if (closed !== "") messageAttributes["outflow.closed"] = { stringValue: closed, dataType: "String" };
  return {
    messageId: `id-${key}`,
    receiptHandle: "rh",
    body: closed === "" ? "{}" : '{"outflow":"closed"}',
    attributes: { MessageGroupId: "g" },
    messageAttributes,
    eventSource: "aws:sqs",
    eventSourceARN: "arn:aws:sqs:us-east-1:123456789012:events.fifo",
  };
}

test("a closing message without a closed hook fails its group loudly", async () => {
  const applied: string[] = [];
  const reasons: unknown[] = [];
  const logs: string[] = [];
  const metrics: string[] = [];
  const h = new Handler((m: Message) => void applied.push(m.key), {
    onFailure: (_id, e) => void reasons.push(e),
    log: (l) => void logs.push(l),
    metrics: (l) => void metrics.push(l),
  });
  const resp = await h.handle({ Records: [record("k1", 1), record("k2", 2, "purged"), record("k3", 3)] });
  assert.deepEqual(resp.batchItemFailures, [{ itemIdentifier: "id-k2" }, { itemIdentifier: "id-k3" }], "its group waits behind it");
  assert.deepEqual(applied, ["k1"]);
  assert.ok(reasons[0] instanceof NoClosedHookError);
  assert.equal((reasons[0] as NoClosedHookError).kind, "no_closed_hook");
  assert.match(logs[0] ?? "", /^ERROR .*no closed hook: queue=events\.fifo/, "it is logged, naming the queue");
  const doc = JSON.parse(metrics[0] ?? "{}") as Record<string, unknown>;
  assert.equal(doc[METRIC_NO_CLOSED_HOOK], 1, "and counted");
  assert.equal(doc["Queue"], "events.fifo");
});

test("ackClosed acknowledges a closing message by choice", async () => {
  const h = new Handler(() => undefined, { closed: ackClosed });
  assert.deepEqual((await h.handle({ Records: [record("k2", 2, "dead-letter")] })).batchItemFailures, []);
});
