/**
 * What the receive-loop tests share: an SQS client on the file's moto
 * server, fresh queues, messages sent as Outflow's dispatcher sends them
 * (conformance/consumer/README.md, "poller.json"), the queue's counts, and
 * a wait on a condition with a generous deadline (never a timing
 * assertion: the tests run on loaded two-core machines).
 */

import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import {
  CreateQueueCommand,
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  SendMessageCommand,
  SQSClient,
  type MessageAttributeValue,
} from "@aws-sdk/client-sqs";
import type { Moto } from "./moto.js";

/** An SQS client on moto. */
export function sqsClient(moto: Moto): SQSClient {
  return new SQSClient({
    endpoint: moto.url,
    region: "us-east-1",
    credentials: { accessKeyId: "test", secretAccessKey: "test" },
    maxAttempts: 5,
  });
}

/** A new queue named prefix and a random suffix (with .fifo for a FIFO queue, content-based deduplication off); its URL. */
export async function createQueue(sqs: SQSClient, prefix: string, fifo: boolean): Promise<string> {
  const name = prefix + randomBytes(6).toString("hex") + (fifo ? ".fifo" : "");
  const out = await sqs.send(
    new CreateQueueCommand({
      QueueName: name,
      Attributes: fifo ? { FifoQueue: "true", ContentBasedDeduplication: "false" } : {},
    }),
  );
  assert.ok(out.QueueUrl, "CreateQueue gave a URL");
  return out.QueueUrl;
}

export async function deleteQueue(sqs: SQSClient, url: string): Promise<void> {
  await sqs.send(new DeleteQueueCommand({ QueueUrl: url }));
}

/** A message as poller.json writes one: a key, and on an ordered route its group and place; closed for a message closing a place. */
export interface Sent {
  key: string;
  group?: string | undefined;
  seq?: number | undefined;
  closed?: string | undefined;
  /** The body, {"key": KEY} when absent. */
  body?: string | undefined;
  /** The FIFO deduplication id, when not the key's (a copy sent again). */
  dedup?: string | undefined;
}

/**
 * Sends m as Outflow sends it: the body, outflow.key, outflow.attempt 1,
 * outflow.seq and outflow.closed when given; on a FIFO queue its group and
 * the key as deduplication id (with -closed for a closing message). The
 * message's SQS id.
 */
export async function sendAsOutflow(sqs: SQSClient, url: string, m: Sent): Promise<string> {
  const attrs: Record<string, MessageAttributeValue> = {
    "outflow.key": { DataType: "String", StringValue: m.key },
    "outflow.attempt": { DataType: "Number", StringValue: "1" },
  };
  if (m.seq !== undefined) attrs["outflow.seq"] = { DataType: "Number", StringValue: String(m.seq) };
  if (m.closed !== undefined) attrs["outflow.closed"] = { DataType: "String", StringValue: m.closed };
  const fifo = url.endsWith(".fifo");
  const out = await sqs.send(
    new SendMessageCommand({
      QueueUrl: url,
      MessageBody: m.body ?? JSON.stringify({ key: m.key }),
      MessageAttributes: attrs,
      ...(fifo ? { MessageGroupId: m.group ?? "g", MessageDeduplicationId: m.dedup ?? m.key + (m.closed !== undefined ? "-closed" : "") } : {}),
    }),
  );
  return out.MessageId ?? "";
}

/** The queue's ApproximateNumberOfMessages (visible) and ApproximateNumberOfMessagesNotVisible (in flight). */
export async function queueCounts(sqs: SQSClient, url: string): Promise<{ visible: number; inFlight: number }> {
  const out = await sqs.send(
    new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"] }),
  );
  return {
    visible: Number(out.Attributes?.ApproximateNumberOfMessages ?? "NaN"),
    inFlight: Number(out.Attributes?.ApproximateNumberOfMessagesNotVisible ?? "NaN"),
  };
}

/**
 * Waits until check holds, polling every 50 ms, for at most ms (a
 * generous bound: it is a deadline for a hang, not a measure of speed);
 * fails with what describe says then.
 */
export async function until(check: () => boolean | Promise<boolean>, what: string, ms = 120_000, describe: () => string = () => ""): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) assert.fail(`waited ${ms / 1000} s for ${what}${describe() ? ": " + describe() : ""}`);
    await sleep(50);
  }
}
