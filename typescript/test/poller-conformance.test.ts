/**
 * The receive loop held to conformance/consumer/poller.json on the
 * project's patched moto server, as its README's "poller.json" section
 * says and as Go's and Python's suites run it: messages sent to a fresh
 * queue as Outflow sends them, consumed by `inbox.poller(...)` until its
 * results number what the scenario counts, then stopped with the
 * AbortSignal; the outcomes, the effects committed and the messages left
 * in the queue checked.
 */

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { GetItemCommand, type DynamoDBClient, type TransactWriteItem } from "@aws-sdk/client-dynamodb";
import { Counts, Inbox, OUTCOMES, newMessage, type Message, type Result } from "../src/consume/index.js";
import { createQueue, deleteQueue, queueCounts, sendAsOutflow, sqsClient } from "./queues.js";
import { createInboxTable, liveSuite, liveTest } from "./tables.js";
import { ROOT, inboxOptions, type Json } from "./vectors.js";

const FILE = ROOT + "conformance/consumer/poller.json";

/** The scenarios: a file that is missing, unreadable or empty fails the suite at load, before any test. */
const SCENARIOS: Json[] = (() => {
  const data = JSON.parse(readFileSync(FILE, "utf8")) as { scenarios?: unknown };
  assert.ok(Array.isArray(data.scenarios) && data.scenarios.length > 0, `${FILE}: no scenarios`);
  return data.scenarios as Json[];
})();

test("poller.json has its scenarios: every outcome, a stop mid-batch, a standard queue", () => {
  assert.ok(SCENARIOS.length >= 4, `poller.json: ${SCENARIOS.length} scenarios`);
  const counted = new Set(SCENARIOS.flatMap((sc) => Object.entries(sc.want.outcomes as Record<string, number>).filter(([, n]) => n > 0).map(([o]) => o)));
  for (const o of OUTCOMES) assert.ok(counted.has(o), `a scenario counts ${o}`);
  for (const o of counted) assert.ok((OUTCOMES as readonly string[]).includes(o), `${o} is an outcome`);
  assert.ok(
    SCENARIOS.some((sc) => typeof sc.stop_at === "string" && sc.stop_at !== ""),
    "a scenario stops the poller mid-batch (stop_at)",
  );
  assert.ok(
    SCENARIOS.some((sc) => sc.queue === "standard"),
    "a scenario on a standard queue",
  );
  assert.ok(
    SCENARIOS.some((sc) => sc.queue === "fifo"),
    "a scenario on a FIFO queue",
  );
  for (const sc of SCENARIOS) {
    assert.ok(sc.queue === "fifo" || sc.queue === "standard", `${sc.name}: queue ${sc.queue}`);
    for (const k of ["outcomes", "effects", "visible", "in_flight"]) assert.ok(k in sc.want, `${sc.name}: want.${k}`);
  }
});

const suite = liveSuite();

/** inbox.json's effect: append the message's key to one item's list. */
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

async function history(db: DynamoDBClient, table: string): Promise<string[]> {
  const out = await db.send(new GetItemCommand({ TableName: table, Key: { pk: { S: "effects" } }, ConsistentRead: true }));
  const list = out.Item?.["history"]?.L ?? [];
  return list.map((v) => v.S ?? "");
}

async function runScenario(db: DynamoDBClient, table: string, sc: Json): Promise<void> {
  assert.ok(suite.moto !== null);
  const sqs = sqsClient(suite.moto);
  const url = await createQueue(sqs, "outflow-ts-poller-", sc.queue === "fifo");
  try {
    const inbox = new Inbox(db, table, "c1", inboxOptions(sc.config));
    const msg = (m: Json): Message => newMessage({ key: m.key, group: m.group ?? "", seq: m.seq ?? 0, closed: m.closed ?? "", attempt: 1 });
    for (const m of sc.before as Json[]) await inbox.apply(msg(m), [effect(table, m.key)]);
    for (const m of sc.send as Json[]) await sendAsOutflow(sqs, url, { key: m.key, group: m.group, seq: m.seq, closed: m.closed });

    const want = sc.want.outcomes as Record<string, number>;
    const expected = Object.values(want).reduce((a, b) => a + b, 0);
    const fail = new Set(sc.fail as string[]);
    const stop = new AbortController();
    const counts = new Counts();
    const results: Result[] = [];
    const poller = inbox.poller(
      sqs,
      url,
      (m) => {
        // Asked while the key's effect runs, which then completes.
        if (m.key === sc.stop_at) stop.abort();
        if (fail.has(m.key)) throw new Error(`the effect of ${m.key} failed`);
        return [effect(table, m.key)];
      },
      {
        wait: 1,
        visibility: 30,
        concurrency: sc.concurrency ?? 4,
        onResult: (r) => {
          results.push(r);
          counts.add(r);
          if (counts.total >= expected) stop.abort();
        },
      },
    );
    const running = poller.run(stop.signal);
    // A deadline for a hang, not a measure of speed: the stop is asked for
    // by the results above; this only ends a run that never gets them.
    const deadline = setTimeout(() => stop.abort(), 180_000);
    try {
      await running;
    } finally {
      clearTimeout(deadline);
    }
    const seen = results.map((r) => `${r.message?.key ?? r.messageId}:${r.outcome}`).join(", ");
    const got: Record<string, number> = {};
    for (const o of OUTCOMES) if (counts.of(o) > 0) got[o] = counts.of(o);
    assert.deepStrictEqual(got, want, `the outcomes counted (${seen})`);
    assert.deepStrictEqual((await history(db, table)).sort(), [...(sc.want.effects as string[])].sort(), "the effects committed");
    const left = await queueCounts(sqs, url);
    assert.deepStrictEqual({ visible: left.visible, in_flight: left.inFlight }, { visible: sc.want.visible, in_flight: sc.want.in_flight }, `the messages left (${seen})`);
    // Every result names its message, decoded: these were all sent as Outflow sends them.
    for (const r of results) assert.ok(r.message !== undefined && r.messageId !== "", JSON.stringify(r));
  } finally {
    await deleteQueue(sqs, url);
    sqs.destroy();
  }
}

for (const sc of SCENARIOS) {
  liveTest(suite, `poller: ${sc.name}`, createInboxTable, "outflow-ts-poller-", (db, table) => runScenario(db, table, sc));
}
