// The interop test's TypeScript consumer (internal/interop), as plain ESM
// on the package's compiled output (typescript/dist): the package's receive
// loop, inbox.poller, on the FIFO queue OUTFLOW_INTEROP_QUEUE_URL, bound to
// an Inbox (table OUTFLOW_INTEROP_INBOX, consumer OUTFLOW_INTEROP_CONSUMER,
// shared with the Go and Python consumers) as typescript/README.md shows:
// the effect returns the consumer's own writes, its ledger item in
// OUTFLOW_INTEROP_LEDGER (which consumer applied the row, its group and
// place, how many times: applies) and its group's log, and the inbox
// commits them with its record of the row; a closing message goes to the
// inbox's close by construction.
//
// It prints {"ready": true} once it can receive, then one line per outcome
// the poller reports (onResult): {outcome, key, group, seq, closed,
// redriven, error}, printed before the poller deletes the message; and
// when stdin closes (the test's signal to stop), it aborts the poller's
// signal and prints {"done": true, "counts": {...}}. The test SIGKILLs it
// at random points and starts another.

import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";

const LANG = "typescript";

const pkg = process.env.OUTFLOW_INTEROP_TYPESCRIPT;
// The SDK the package itself resolves (its node_modules), so that the
// clients and the package share one copy of its classes.
const require = createRequire(path.join(pkg, "package.json"));
const { DynamoDBClient } = require("@aws-sdk/client-dynamodb");
const { SQSClient } = require("@aws-sdk/client-sqs");
/** @type {typeof import("../../../typescript/dist/src/consume/index.js")} */
const consume = await import(pathToFileURL(path.join(pkg, "dist", "src", "consume", "index.js")).href);

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
};

const url = env("OUTFLOW_INTEROP_QUEUE_URL");
const ledger = env("OUTFLOW_INTEROP_LEDGER");
const visibility = Number(env("OUTFLOW_INTEROP_VISIBILITY"));

const inbox = new consume.Inbox(new DynamoDBClient({ maxAttempts: 10 }), env("OUTFLOW_INTEROP_INBOX"), env("OUTFLOW_INTEROP_CONSUMER"));

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

const counts = new consume.Counts();
const errorText = (e) => (e === undefined ? "" : e instanceof Error ? `${e.name}: ${e.message}` : String(e));
const poller = inbox.poller(new SQSClient({ maxAttempts: 10 }), url, effect, {
  visibility,
  wait: 1,
  onResult: (r) => {
    counts.add(r);
    const m = r.message;
    say({ outcome: r.outcome, key: m?.key ?? "", group: m?.group ?? "", seq: m?.seq ?? 0, closed: m?.closed ?? "", redriven: m?.redriven ?? false, error: errorText(r.error) });
  },
});

const stop = new AbortController();
process.stdin.on("data", () => {});
process.stdin.on("end", () => stop.abort()); // stdin closes: stop

say({ ready: true });
await poller.run(stop.signal);
say({ done: true, counts: { applied: counts.applied, closed: counts.closed, duplicate: counts.duplicate, late: counts.late, gap: counts.gap, failed: counts.failed, skipped: counts.skipped } });
process.exit(0);
