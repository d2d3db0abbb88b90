// The interop test's TypeScript producer (internal/interop), as plain ESM
// on the package's compiled output (typescript/dist): stages
// OUTFLOW_INTEROP_ROWS rows into each of the OUTFLOW_INTEROP_GROUPS ordered
// groups of route OUTFLOW_INTEROP_ROUTE, in the dispatcher's table
// OUTFLOW_INTEROP_TABLE, each in one transaction with a write of its own to
// OUTFLOW_INTEROP_SHOP, racing the Go and Python producers for each group's
// next place.
//
// It prints {"ready": true} once its producer has read the published
// configuration, waits for the line "go" on stdin, stages, and prints
// {"staged": [{key, group}, ...] in its commit order, "races": n}.
// OUTFLOW_INTEROP_TYPESCRIPT is the package's directory; AWS_ENDPOINT_URL,
// AWS_REGION and the credentials come from the environment.

import { createRequire } from "node:module";
import path from "node:path";
import { createInterface } from "node:readline";
import { setTimeout as sleep } from "node:timers/promises";
import { pathToFileURL } from "node:url";

const LANG = "typescript";
const TRIES = 500;

const pkg = process.env.OUTFLOW_INTEROP_TYPESCRIPT;
// The SDK the package itself resolves (its node_modules), so that the
// client and the package share one copy of its classes.
const { DynamoDBClient } = createRequire(path.join(pkg, "package.json"))("@aws-sdk/client-dynamodb");
/** @type {typeof import("../../../typescript/dist/src/index.js")} */
const outflow = await import(pathToFileURL(path.join(pkg, "dist", "src", "index.js")).href);

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
};

const table = env("OUTFLOW_INTEROP_TABLE");
const route = env("OUTFLOW_INTEROP_ROUTE");
const shop = env("OUTFLOW_INTEROP_SHOP");
const groups = env("OUTFLOW_INTEROP_GROUPS").split(",");
const rows = Number(env("OUTFLOW_INTEROP_ROWS"));

const client = new DynamoDBClient({ maxAttempts: 10 });
const producer = await outflow.Producer.fromPublished(client, table);
console.log(JSON.stringify({ ready: true }));

const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const first = await lines.next();
if (first.done || first.value.trim() !== "go") {
  console.error("no go on stdin");
  process.exit(2);
}

const staged = [];
let races = 0;
for (let i = 0; i < rows; i++) {
  for (const group of groups) {
    const key = `ts-${group}-${String(i).padStart(3, "0")}`;
    const row = { key, queue: route, group, payload: JSON.stringify({ lang: LANG, group, index: i }), attributes: { lang: LANG } };
    // The business write the row is staged with, in one transaction.
    const own = { Put: { TableName: shop, Item: { pk: { S: key }, lang: { S: LANG } } } };
    for (let attempt = 0; ; attempt++) {
      try {
        await producer.transact([row], [own]);
        break;
      } catch (e) {
        if (!(e instanceof outflow.TransactError)) throw e;
        if (e.has("already_staged")) break; // an earlier try committed; its answer was lost
        if (!e.retryable || attempt === TRIES - 1) throw e;
        if (e.has("group_race")) races++;
        await sleep(1 + Math.random() * 19); // back off, then race again
      }
    }
    staged.push({ key, group });
  }
}
console.log(JSON.stringify({ staged, races }));
process.exit(0);
