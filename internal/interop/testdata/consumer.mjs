// The interop test's TypeScript consumer (internal/interop), as plain ESM
// on the package's compiled output (typescript/dist): a receive loop on the
// FIFO queue OUTFLOW_INTEROP_QUEUE_URL, as the Python README says to write
// one, that applies each message with an Inbox (table OUTFLOW_INTEROP_INBOX,
// consumer OUTFLOW_INTEROP_CONSUMER, shared with the Python consumer) whose
// effect, in the same transaction, records the row in the ledger table
// OUTFLOW_INTEROP_LEDGER: which consumer applied it, its group and place,
// how many times (applies), and its group's log.
//
// It prints {"ready": true} once it can receive, a line {"applied": key,
// "group": g, "seq": n} for each effect committed, and when stdin closes,
// {"done": true, "counts": {...}, "errors": [the first few]}.

import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";

import { SQS } from "./sqs.mjs";

const LANG = "typescript";

const pkg = process.env.OUTFLOW_INTEROP_TYPESCRIPT;
// The SDK the package itself resolves (its node_modules), so that the
// client and the package share one copy of its classes.
const require = createRequire(path.join(pkg, "package.json"));
const { DynamoDBClient } = require("@aws-sdk/client-dynamodb");
/** @type {typeof import("../../../typescript/dist/src/consume/index.js")} */
const consume = await import(pathToFileURL(path.join(pkg, "dist", "src", "consume", "index.js")).href);

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
};

const url = env("OUTFLOW_INTEROP_QUEUE_URL");
const ledger = env("OUTFLOW_INTEROP_LEDGER");
const batch = Number(env("OUTFLOW_INTEROP_BATCH"));
const visibility = Number(env("OUTFLOW_INTEROP_VISIBILITY"));

const db = new DynamoDBClient({ maxAttempts: 10 });
const sqs = new SQS(db, require);
const inbox = new consume.Inbox(db, env("OUTFLOW_INTEROP_INBOX"), env("OUTFLOW_INTEROP_CONSUMER"));

/** The consumer's own writes for m: its ledger item, and its group's log. */
function effect(m) {
  return [
    {
      Update: {
        TableName: ledger,
        Key: { pk: { S: `applied ${m.key}` } },
        UpdateExpression: "SET #key = :key, #group = :group, #seq = :seq, #by = :by ADD #applies :one",
        ExpressionAttributeNames: { "#key": "key", "#group": "group", "#seq": "seq", "#by": "consumer", "#applies": "applies" },
        ExpressionAttributeValues: {
          ":key": { S: m.key },
          ":group": { S: m.group },
          ":seq": { N: String(m.seq) },
          ":by": { S: LANG },
          ":one": { N: "1" },
        },
      },
    },
    {
      Update: {
        TableName: ledger,
        Key: { pk: { S: `log ${m.group}` } },
        UpdateExpression: "SET #log = list_append(if_not_exists(#log, :empty), :key)",
        ExpressionAttributeNames: { "#log": "log" },
        ExpressionAttributeValues: { ":empty": { L: [] }, ":key": { L: [{ S: m.key }] } },
      },
    },
  ];
}

const say = (fields) => console.log(JSON.stringify(fields));

let stop = false;
process.stdin.on("data", () => {});
process.stdin.on("end", () => {
  stop = true; // stdin closes: stop
});

const counts = { applied: 0, duplicates: 0, late: 0, left: 0, delete_failures: 0 };
const errors = [];
say({ ready: true });
while (!stop) {
  const out = await sqs.receiveMessage({
    QueueUrl: url,
    MaxNumberOfMessages: batch,
    WaitTimeSeconds: 1,
    VisibilityTimeout: visibility,
    MessageAttributeNames: ["All"],
    MessageSystemAttributeNames: ["MessageGroupId"],
  });
  const done = [];
  const failedGroups = new Set();
  for (const [i, raw] of (out.Messages ?? []).entries()) {
    const group = raw.Attributes?.MessageGroupId ?? "";
    if (failedGroups.has(group)) {
      counts.left++; // after a failure of its group in this batch: it comes back, in order
      continue;
    }
    try {
      const m = consume.fromQueue(url, raw);
      if (m.closed) {
        await inbox.close(m);
      } else {
        await inbox.apply(m, effect(m));
        say({ applied: m.key, group: m.group, seq: m.seq });
        counts.applied++;
      }
    } catch (e) {
      if (e instanceof consume.DuplicateError) {
        counts.duplicates++;
      } else if (e instanceof consume.LateError) {
        counts.late++;
      } else {
        // OrderError and anything else: leave it, and its group's later messages.
        counts.left++;
        failedGroups.add(group);
        if (errors.length < 20) errors.push(`${e?.name}: ${e?.message}`);
        continue;
      }
    }
    done.push({ Id: String(i), ReceiptHandle: raw.ReceiptHandle });
  }
  if (done.length > 0) {
    const res = await sqs.deleteMessageBatch({ QueueUrl: url, Entries: done });
    counts.delete_failures += (res.Failed ?? []).length;
  }
}
say({ done: true, counts, errors });
process.exit(0);
