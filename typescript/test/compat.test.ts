/**
 * Every earlier release's messages (conformance/compat/*\/messages.json,
 * frozen from what that release's dispatcher sent) decode with this
 * package's consume as they did with that release's Go consume package:
 * a consumer upgraded to this version reads what an older dispatcher
 * sent. Go's internal/compat tests hold the Go side;
 * docs/compatibility.md says what is promised.
 */

import assert from "node:assert/strict";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { test } from "node:test";
import { fromLambda, fromQueue, type Message } from "../src/consume/index.js";
import { ROOT, payload, type Json } from "./vectors.js";

const COMPAT = ROOT + "conformance/compat/";
const RELEASES = readdirSync(COMPAT)
  .filter((name) => statSync(COMPAT + name).isDirectory())
  .sort();
const VECTORS: { release: string; v: Json }[] = RELEASES.flatMap((release) =>
  (JSON.parse(readFileSync(COMPAT + release + "/messages.json", "utf8")).vectors as Json[]).map((v) => ({ release, v })),
);

test("every release has messages of every envelope", () => {
  assert.ok(RELEASES.length > 0, `no release under ${COMPAT}`);
  for (const release of RELEASES) {
    const mine = VECTORS.filter((x) => x.release === release);
    assert.ok(mine.length > 0, `${release}: no messages`);
    assert.deepStrictEqual(new Set(mine.map((x) => x.v.want.envelope)), new Set(["sqs", "sns", "eventbridge"]), release);
  }
});

// Each reason of closing message (a dead letter under skip, a purge) in
// each envelope that carries one (SQS attributes, which an SNS topic's raw
// subscription gives too, and SNS's JSON envelope), as received and as a
// Lambda record: without them a decoder that stopped reading one would
// pass (review 49, R49-1). Go's and Python's compat tests hold the same.
test("every release freezes a closing message of each reason in each envelope", () => {
  for (const release of RELEASES) {
    const forms = new Set(
      VECTORS.filter((x) => x.release === release && x.v.want.closed).map((x) => `${x.v.shape} ${x.v.want.envelope} ${x.v.want.closed}`),
    );
    for (const shape of ["sdk", "lambda"]) {
      for (const envelope of ["sqs", "sns"]) {
        for (const reason of ["dead-letter", "purged"]) {
          assert.ok(
            forms.has(`${shape} ${envelope} ${reason}`),
            `${release}: no closing message of reason ${reason} in the ${envelope} envelope (${shape}); frozen: ${[...forms].sort().join(", ")}`,
          );
        }
      }
    }
  }
});

function decode(v: Json): Message {
  if (v.shape === "lambda") return fromLambda(v.record);
  const msg = structuredClone(v.message);
  // The SDK gives a binary attribute's value as bytes; the fixture writes it in base64.
  for (const a of Object.values((msg.MessageAttributes ?? {}) as Record<string, Json>)) {
    if (typeof a.BinaryValue === "string") a.BinaryValue = Uint8Array.from(Buffer.from(a.BinaryValue, "base64"));
  }
  return fromQueue(v.queue_url as string, msg);
}

for (const { release, v } of VECTORS) {
  test(`an earlier release's message decodes as it did: ${release} ${v.name}`, () => {
    const m = decode(v);
    const got = {
      key: m.key,
      route: m.route,
      group: m.group,
      seq: m.seq,
      closed: m.closed,
      attempt: m.attempt,
      payload: m.payload,
      attributes: m.attributes,
      trace_parent: m.traceParent,
      envelope: m.envelope,
      message_id: m.messageId,
      receipt_handle: m.receiptHandle,
    };
    assert.deepStrictEqual(got, { ...v.want, payload: payload(v.want.payload) });
  });
}
