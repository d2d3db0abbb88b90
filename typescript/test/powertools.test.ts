/**
 * The record handler run by the real Powertools for AWS Lambda
 * (TypeScript) batch processor (@aws-lambda-powertools/batch, a
 * devDependency: the package itself never imports it), on messages a moto
 * FIFO queue gave, shaped as an event source mapping hands them to Lambda,
 * into an Inbox on moto: a failure fails the rest of its group and not the
 * other groups, a closing message goes to the inbox's close, and the
 * redelivery applies the group in order.
 */

import assert from "node:assert/strict";
import { test } from "node:test";
import { GetItemCommand, type DynamoDBClient, type TransactWriteItem } from "@aws-sdk/client-dynamodb";
import { GetQueueAttributesCommand, ReceiveMessageCommand, type Message as SQSMessage, type SQSClient } from "@aws-sdk/client-sqs";
import { BatchProcessor, EventType, SqsFifoPartialProcessorAsync, processPartialResponse } from "@aws-lambda-powertools/batch";
import { Counts, Inbox, NoClosedHookError, recordHandler, type LambdaSQSRecord } from "../src/consume/index.js";
import { createQueue, deleteQueue, sendAsOutflow, sqsClient, until, type Sent } from "./queues.js";
import { createInboxTable, liveSuite, liveTest } from "./tables.js";

const suite = liveSuite();

/** A live test with an inbox table and a queue on moto. */
function powertoolsTest(name: string, fifo: boolean, run: (db: DynamoDBClient, table: string, sqs: SQSClient, url: string) => Promise<void>): void {
  liveTest(suite, name, createInboxTable, "outflow-ts-powertools-", async (db, table) => {
    assert.ok(suite.moto !== null);
    const sqs = sqsClient(suite.moto);
    const url = await createQueue(sqs, "outflow-ts-powertools-", fifo);
    try {
      await run(db, table, sqs, url);
    } finally {
      await deleteQueue(sqs, url);
      sqs.destroy();
    }
  });
}

/** A message ReceiveMessage gave, as Lambda's event source mapping gives it to a function. */
function lambdaRecord(m: SQSMessage, queueArn: string): LambdaSQSRecord & Record<string, unknown> {
  const messageAttributes: Record<string, { stringValue?: string; dataType: string }> = {};
  for (const [name, v] of Object.entries(m.MessageAttributes ?? {})) {
    messageAttributes[name] = { dataType: v.DataType ?? "String", ...(v.StringValue !== undefined ? { stringValue: v.StringValue } : {}) };
  }
  const attributes: Record<string, string> = { ...(m.Attributes ?? {}), ApproximateReceiveCount: "1" };
  return {
    messageId: m.MessageId ?? "",
    receiptHandle: m.ReceiptHandle ?? "",
    body: m.Body ?? "",
    attributes,
    messageAttributes,
    md5OfBody: m.MD5OfBody ?? "",
    eventSource: "aws:sqs",
    eventSourceARN: queueArn,
    awsRegion: "us-east-1",
  };
}

/** Sends the messages as Outflow sends them, then receives them all, as Lambda's poller would: the event. */
async function eventOf(sqs: SQSClient, url: string, sent: Sent[]): Promise<{ Records: (LambdaSQSRecord & Record<string, unknown>)[] }> {
  for (const m of sent) await sendAsOutflow(sqs, url, m);
  const arn = (await sqs.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ["QueueArn"] }))).Attributes?.["QueueArn"] ?? "";
  assert.ok(arn.endsWith(url.slice(url.lastIndexOf("/") + 1)), arn);
  const got: SQSMessage[] = [];
  await until(
    async () => {
      const out = await sqs.send(
        new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1, MessageAttributeNames: ["All"], MessageSystemAttributeNames: ["MessageGroupId"] }),
      );
      got.push(...(out.Messages ?? []));
      return got.length >= sent.length;
    },
    `${sent.length} messages received`,
  );
  return { Records: got.map((m) => lambdaRecord(m, arn)) };
}

/** The effect: append the message's key to one item's list (inbox.json's). */
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

async function item(db: DynamoDBClient, table: string, pk: string) {
  return (await db.send(new GetItemCommand({ TableName: table, Key: { pk: { S: pk } }, ConsistentRead: true }))).Item;
}

async function history(db: DynamoDBClient, table: string): Promise<string[]> {
  return ((await item(db, table, "effects"))?.["history"]?.L ?? []).map((v) => v.S ?? "");
}

powertoolsTest(
  "inbox.recordHandler with SqsFifoPartialProcessorAsync: a failure fails its group's later messages, a closing message closes its place",
  true,
  async (db, table, sqs, url) => {
    const event = await eventOf(sqs, url, [
      { key: "a", group: "g1", seq: 1 },
      { key: "b", group: "g1", seq: 2 },
      { key: "c", group: "g1", seq: 3 },
      { key: "x", group: "g2", seq: 1 },
      { key: "closes-2", group: "g2", seq: 2, closed: "purged" },
      { key: "y", group: "g2", seq: 3 },
    ]);
    const id = (key: string) => event.Records.find((r) => (r.messageAttributes?.["outflow.key"]?.stringValue ?? "") === key)?.messageId ?? "";
    const inbox = new Inbox(db, table, "c1");
    let failB = true;
    const counts = new Counts();
    const handler = inbox.recordHandler(
      (m) => {
        if (m.key === "b" && failB) throw new Error("the effect of b failed");
        return [effect(table, m.key)];
      },
      { onResult: counts.add },
    );

    const first = await processPartialResponse(event, handler, new SqsFifoPartialProcessorAsync(), { skipGroupOnError: true });
    assert.deepStrictEqual(
      first.batchItemFailures.map((f) => f.itemIdentifier),
      [id("b"), id("c")],
      "b failed, and c behind it; g2 went on",
    );
    assert.deepStrictEqual(await history(db, table), ["a", "x", "y"]);
    assert.deepStrictEqual((await item(db, table, "inbox c1 closes-2 closed"))?.["closed"], { S: "purged" }, "the closing message went to the inbox's close");
    assert.deepStrictEqual((await item(db, table, "cursor c1 g2"))?.["seq"], { N: "3" });
    // Powertools fails c without calling the handler: the handler heard five.
    assert.deepStrictEqual([counts.applied, counts.closed, counts.failed, counts.total], [3, 1, 1, 5]);

    // The redelivery of what failed: the group goes on, in order.
    failB = false;
    const retried = { Records: event.Records.filter((r) => first.batchItemFailures.some((f) => f.itemIdentifier === r.messageId)) };
    const second = await processPartialResponse(retried, handler, new SqsFifoPartialProcessorAsync(), { skipGroupOnError: true });
    assert.deepStrictEqual(second.batchItemFailures, []);
    assert.deepStrictEqual(await history(db, table), ["a", "x", "y", "b", "c"]);
    assert.deepStrictEqual((await item(db, table, "cursor c1 g1"))?.["seq"], { N: "3" });
    // The whole batch again: duplicates, acknowledged, nothing applied twice.
    const again = await processPartialResponse(event, handler, new SqsFifoPartialProcessorAsync(), { skipGroupOnError: true });
    assert.deepStrictEqual(again.batchItemFailures, []);
    assert.deepStrictEqual(await history(db, table), ["a", "x", "y", "b", "c"]);
    assert.equal(counts.duplicate, 6);
  },
);

powertoolsTest("recordHandler with no closed hook fails a closing message loudly; the processor fails its group's rest", true, async (db, table, sqs, url) => {
  const event = await eventOf(sqs, url, [
    { key: "a", group: "g1", seq: 1 },
    { key: "closes-2", group: "g1", seq: 2, closed: "dead-letter" },
    { key: "c", group: "g1", seq: 3 },
  ]);
  const inbox = new Inbox(db, table, "c1");
  const logs: string[] = [];
  const metrics: string[] = [];
  // The first recipe's wiring: an inbox used inside apply, no closed hook.
  const handler = recordHandler((m) => inbox.apply(m, [effect(table, m.key)]), { log: (l) => void logs.push(l), metrics: (l) => void metrics.push(l) });
  const processor = new SqsFifoPartialProcessorAsync();
  const resp = await processPartialResponse(event, handler, processor, { skipGroupOnError: true });
  assert.equal(resp.batchItemFailures.length, 2);
  assert.ok(processor.errors.some((e) => e instanceof NoClosedHookError));
  assert.equal(logs.length, 1);
  assert.match(metrics[0] ?? "", /"ClosingMessagesWithoutHook":1/);
  assert.deepStrictEqual(await history(db, table), ["a"]);
});

powertoolsTest("inbox.recordHandler with BatchProcessor on a standard queue: each message stands alone", false, async (db, table, sqs, url) => {
  const event = await eventOf(sqs, url, [{ key: "p" }, { key: "q" }, { key: "r" }]);
  const inbox = new Inbox(db, table, "c1");
  const handler = inbox.recordHandler((m) => {
    if (m.key === "q") throw new Error("q failed");
    return [effect(table, m.key)];
  });
  const resp = await processPartialResponse(event, handler, new BatchProcessor(EventType.SQS));
  assert.equal(resp.batchItemFailures.length, 1);
  assert.deepStrictEqual((await history(db, table)).sort(), ["p", "r"]);
});
