/**
 * What the live tests share: the moto server (one per test file, each
 * file being its own process), a client on it, and the tables Outflow's
 * dispatcher and a consumer use, made as Go makes them.
 */

import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, test, type TestContext } from "node:test";
import { CreateTableCommand, DeleteTableCommand, DynamoDBClient, waitUntilTableExists } from "@aws-sdk/client-dynamodb";
import { startMoto, type Moto } from "./moto.js";

export const NO_MOTO = "moto is not installed: run `make venv-moto` in Outflow's repository, or set OUTFLOW_MOTO_PYTHON";

/** The live part of a test file: moto started before its tests and stopped after. */
export interface Live {
  /** The client on moto; null until `before` ran, or without moto. */
  client: DynamoDBClient | null;
  moto: Moto | null;
  /**
   * Skips t without moto, or fails it when OUTFLOW_REQUIRE_MOTO is set (a
   * skipped live test would prove nothing); else the client.
   */
  need(t: TestContext): DynamoDBClient | null;
}

/** Registers the hooks that start moto for this file's tests and stop it after. A moto that cannot start fails every test of the file. */
export function liveSuite(): Live {
  const live: Live = {
    client: null,
    moto: null,
    need(t) {
      if (this.moto === null) {
        if (process.env["OUTFLOW_REQUIRE_MOTO"]) assert.fail(NO_MOTO);
        t.skip(NO_MOTO);
        return null;
      }
      assert.ok(this.client !== null);
      return this.client;
    },
  };
  before(async () => {
    live.moto = await startMoto();
    if (live.moto === null) return;
    live.client = new DynamoDBClient({
      endpoint: live.moto.url,
      region: "us-east-1",
      credentials: { accessKeyId: "test", secretAccessKey: "test" },
      maxAttempts: 5,
    });
  });
  after(async () => {
    live.client?.destroy();
    await live.moto?.stop();
  });
  return live;
}

/** A test on a new table made by create (prefix and random suffix), deleted after. */
export function liveTest(
  live: Live,
  name: string,
  create: (db: DynamoDBClient, table: string) => Promise<void>,
  prefix: string,
  run: (db: DynamoDBClient, table: string) => Promise<void>,
): void {
  test(name, async (t) => {
    const db = live.need(t);
    if (db === null) return;
    const table = prefix + randomBytes(6).toString("hex");
    await create(db, table);
    try {
      await run(db, table);
    } finally {
      await db.send(new DeleteTableCommand({ TableName: table }));
    }
  });
}

async function waitFor(db: DynamoDBClient, name: string): Promise<void> {
  await waitUntilTableExists({ client: db, maxWaitTime: 60, minDelay: 1, maxDelay: 1 }, { TableName: name });
}

/** An outbox table as Go's dynamo.Table.CreateTableInput makes it. */
export async function createOutboxTable(db: DynamoDBClient, name: string): Promise<void> {
  await db.send(
    new CreateTableCommand({
      TableName: name,
      BillingMode: "PAY_PER_REQUEST",
      KeySchema: [{ AttributeName: "pk", KeyType: "HASH" }],
      AttributeDefinitions: [
        { AttributeName: "dead_queue", AttributeType: "S" },
        { AttributeName: "due_at", AttributeType: "N" },
        { AttributeName: "failed_at", AttributeType: "N" },
        { AttributeName: "pk", AttributeType: "S" },
        { AttributeName: "shard", AttributeType: "S" },
      ],
      GlobalSecondaryIndexes: [
        {
          IndexName: "due",
          KeySchema: [
            { AttributeName: "shard", KeyType: "HASH" },
            { AttributeName: "due_at", KeyType: "RANGE" },
          ],
          Projection: { ProjectionType: "INCLUDE", NonKeyAttributes: ["created_at", "queue", "prev", "seq"] },
        },
        {
          IndexName: "dead",
          KeySchema: [
            { AttributeName: "dead_queue", KeyType: "HASH" },
            { AttributeName: "failed_at", KeyType: "RANGE" },
          ],
          Projection: { ProjectionType: "INCLUDE", NonKeyAttributes: ["attempt", "last_error"] },
        },
      ],
      StreamSpecification: { StreamEnabled: true, StreamViewType: "NEW_IMAGE" },
    }),
  );
  await waitFor(db, name);
}

/** A consumer's table as Go's consume.CreateTable makes it (TTL aside): a string partition key pk. */
export async function createInboxTable(db: DynamoDBClient, name: string): Promise<void> {
  await db.send(
    new CreateTableCommand({
      TableName: name,
      BillingMode: "PAY_PER_REQUEST",
      KeySchema: [{ AttributeName: "pk", KeyType: "HASH" }],
      AttributeDefinitions: [{ AttributeName: "pk", AttributeType: "S" }],
    }),
  );
  await waitFor(db, name);
}
