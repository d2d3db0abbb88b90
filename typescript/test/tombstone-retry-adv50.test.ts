/**
 * Review of issue 50 (R50-1): a producer's retry of a key the 1.0.0
 * dispatcher delivered. Since 6c60bc6 the settle to done (dynamo.Store.Done,
 * under a done retention) removes the row's payload and attributes and keeps
 * their digest in `content` (dynamo.ContentDigest); the CHANGELOG says "a
 * producer's retry of a delivered key is still recognised". Go's producer
 * compares by the digest; TypeScript's item.contentOf reads the tombstone as
 * an empty payload with no attributes, so the same row, retried, is a
 * key_conflict. The tombstone is written as Store.Done writes it, the digest
 * computed by the form docs/compatibility.md documents.
 */

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { UpdateItemCommand, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { Producer, PutError, TransactError, type Row } from "../src/index.js";
import { createOutboxTable, liveSuite, liveTest } from "./tables.js";

const suite = liveSuite();

function digest(payload: Buffer, attributes: Record<string, string>): string {
  const h = createHash("sha256");
  const field = (b: Buffer): void => {
    const n = Buffer.alloc(8);
    n.writeBigUInt64BE(BigInt(b.length));
    h.update(n);
    h.update(b);
  };
  field(payload);
  for (const name of Object.keys(attributes).filter((k) => k !== "traceparent").sort()) {
    field(Buffer.from(name));
    field(Buffer.from(attributes[name] ?? ""));
  }
  return "sha256:" + h.digest("hex");
}

/** What dynamo.Store.Done does to a claimed row under a done retention. */
async function settleDone(db: DynamoDBClient, table: string, key: string, payload: Buffer, attributes: Record<string, string>): Promise<void> {
  await db.send(
    new UpdateItemCommand({
      TableName: table,
      Key: { pk: { S: key } },
      UpdateExpression: "SET #s = :done, #done = :now, #exp = :exp, #c = :c REMOVE #shard, #due, #tok, #lease, #p, #a",
      ExpressionAttributeNames: {
        "#s": "status", "#done": "done_at", "#exp": "expires_at", "#c": "content", "#shard": "shard",
        "#due": "due_at", "#tok": "token", "#lease": "lease_until", "#p": "payload", "#a": "attributes",
      },
      ExpressionAttributeValues: {
        ":done": { S: "done" }, ":now": { N: "1796270000500" }, ":exp": { N: "1796356400" },
        ":c": { S: digest(payload, attributes) },
      },
    }),
  );
}

const ROW: Row = { key: "order-1", queue: "orders", payload: '{"n":1}', attributes: { tenant: "t1" } };

liveTest(suite, "R50-1: put's retry of a delivered key is recognised", createOutboxTable, "outflow-ts-", async (db, table) => {
  const producer = new Producer(db, { table, ordered: [] }, { traceParent: () => "" });
  await producer.put(ROW);
  await settleDone(db, table, "order-1", Buffer.from('{"n":1}'), { tenant: "t1" });
  try {
    await producer.put(ROW);
  } catch (e) {
    assert.fail(`the retry of a delivered key is refused: ${e instanceof PutError ? e.errors.map(String).join("; ") : String(e)}`);
  }
  // Other content under the key is still a conflict.
  await assert.rejects(producer.put({ ...ROW, payload: '{"n":2}' }), (e: unknown) => e instanceof PutError && e.errors[0]?.kind === "key_conflict");
});

liveTest(suite, "R50-1: transact's retry of a delivered key is already_staged", createOutboxTable, "outflow-ts-", async (db, table) => {
  const producer = new Producer(db, { table, ordered: [] }, { traceParent: () => "" });
  await producer.put(ROW);
  await settleDone(db, table, "order-1", Buffer.from('{"n":1}'), { tenant: "t1" });
  await assert.rejects(producer.transact([ROW]), (e: unknown) => {
    assert.ok(e instanceof TransactError, String(e));
    assert.deepStrictEqual(e.items.map((i) => i.reason), ["already_staged"], String(e));
    return true;
  });
});
