/**
 * Review of issue 51, adopted: the receive loop's shutdown during a long
 * poll (on the project's patched moto server), and the producer's room
 * for outflow.redriven with an attribute named __proto__ (offline).
 */

import assert from "node:assert/strict";
import { test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { ChangeMessageVisibilityBatchCommand, ReceiveMessageCommand, type SQSClient } from "@aws-sdk/client-sqs";
import { OutflowError, Producer } from "../src/index.js";
import { Poller, type PollerCallOptions, type PollerClient } from "../src/consume/index.js";
import { FakeDynamoDB } from "./fakes.js";
import { createQueue, deleteQueue, queueCounts, sendAsOutflow, sqsClient, until } from "./queues.js";
import { liveSuite } from "./tables.js";

const suite = liveSuite();

// SQS (moto likewise) goes on serving a long poll whose request was
// dropped until its wait ends: a message sent after the poller stopped
// was received for a consumer that was gone, invisible for the whole
// visibility timeout. run now leaves the poll to answer and gives back
// what it receives, as Python's and Go's loops do.
test("a long poll abandoned at shutdown gives back what it receives", async (t) => {
  if (suite.need(t) === null) return;
  assert.ok(suite.moto !== null);
  const sqs: SQSClient = sqsClient(suite.moto);
  const url = await createQueue(sqs, "outflow-ts-review51-", false);
  try {
    let receiving = false;
    let answered = 0;
    const client: PollerClient = {
      async send(command: never, options?: PollerCallOptions) {
        const receive = (command as unknown) instanceof ReceiveMessageCommand;
        if (receive) receiving = true;
        const out = (await sqs.send(command, options)) as { Messages?: unknown[] };
        // A poll answered empty, or the release of what it took.
        if ((receive && (out.Messages ?? []).length === 0) || (command as unknown) instanceof ChangeMessageVisibilityBatchCommand) answered++;
        return out;
      },
    } as PollerClient;
    const applied: string[] = [];
    const poller = new Poller({ sqs: client, queueUrl: url, apply: (m) => void applied.push(m.key), wait: 5, visibility: 60 });
    const stop = new AbortController();
    const running = poller.run(stop.signal);
    await until(() => receiving, "the long poll to start");
    await sleep(500); // the poll is with the server
    stop.abort();
    await running;

    // A message for the poll still in flight at the server.
    await sendAsOutflow(sqs, url, { key: "late-comer" });
    await until(() => answered > 0, "the abandoned poll to answer");
    // A poll the client dropped answers nobody: the server holds it to its
    // wait's end, and takes the message meanwhile.
    await sleep(8_000);
    assert.deepEqual(applied, [], "nothing was applied after shutdown");
    assert.deepEqual(await queueCounts(sqs, url), { visible: 1, inFlight: 0 });
  } finally {
    await deleteQueue(sqs, url);
    sqs.destroy();
  }
});

// The three producers agree at the size limit, and a row of an ordered
// route is sized with outflow.redriven. An attribute named __proto__ (a
// valid SQS name, which Go and Python count, size and stage) went to the
// prototype setter: neither counted nor sized, and dropped from the
// staged row in silence.
const LIMIT = 2048;
// Go's size of the ordered row's redriven copy, widest attempt and place:
// outflow.key=k, outflow.attempt=1000, outflow.seq=9223372036854775807,
// outflow.redriven=1, and one 9-character attribute of value "v".
const FIXED = 11 + 6 + 1 + (15 + 6 + 4) + (11 + 6 + 19) + (16 + 6 + 1) + (9 + 6 + 1);
const protoAttributes = () => JSON.parse('{"__proto__":"v"}') as Record<string, string>;

test("an ordered row with an attribute named __proto__ is sized with it, as Go and Python size it", async () => {
  const payload = "x".repeat(LIMIT - FIXED + 1); // one byte over
  const producer = new Producer(new FakeDynamoDB(), { table: "outbox", ordered: ["orders.fifo"], maxMessageBytes: LIMIT });
  const tooLarge = (e: unknown) => e instanceof OutflowError && e.kind === "too_large";

  const control = { queue: "orders.fifo", group: "g", key: "k", payload, attributes: { __proto_x: "v" } };
  await assert.rejects(producer.transactItems([control]), tooLarge, "a 9-character attribute one byte over is refused");

  const proto = { queue: "orders.fifo", group: "g", key: "k", payload, attributes: protoAttributes() };
  assert.deepEqual(Object.keys(proto.attributes), ["__proto__"]);
  await assert.rejects(producer.transactItems([proto]), tooLarge, "__proto__ is an attribute as __proto_x is: one byte over is refused");
});

test("an attribute named __proto__ is staged, never dropped in silence", async () => {
  const producer = new Producer(new FakeDynamoDB(), { table: "outbox", ordered: ["orders.fifo"] });
  const items = await producer.transactItems([{ queue: "orders.fifo", group: "g", key: "k", payload: "x", attributes: protoAttributes() }]);
  const put = items.find((i) => i.Put?.Item?.["pk"]?.S === "k");
  assert.ok(put?.Put?.Item !== undefined);
  const m = put.Put.Item["attributes"]?.M ?? {};
  assert.deepEqual(Object.keys(m), ["__proto__"], "the row's one attribute is in the staged item");
});
