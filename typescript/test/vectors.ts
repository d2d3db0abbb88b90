/** Reads the shared conformance vectors (conformance/producer/*.json): what they hold is described in conformance/README.md. */

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type { Config, Row } from "../src/index.js";
import { GapPolicy, JoinPolicy, LatePolicy, type InboxOptions } from "../src/consume/index.js";

/** The repository's root: tests run from typescript/dist/test/. */
export const ROOT = fileURLToPath(new URL("../../../", import.meta.url));
export const PRODUCER = ROOT + "conformance/producer/";

// The vectors are JSON of many shapes: read as such.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Json = any;

/** The vectors of one file; a missing or empty file fails the suite. */
export function load(name: string): Json[] {
  const path = PRODUCER + name;
  const data = JSON.parse(readFileSync(path, "utf8")) as { vectors?: unknown };
  assert.ok(Array.isArray(data.vectors) && data.vectors.length > 0, `${path}: no vectors`);
  return data.vectors as Json[];
}

function concat(parts: Uint8Array[]): Uint8Array {
  return Uint8Array.from(Buffer.concat(parts));
}

/** A payload as a vector writes it: text, base64, text or base64 repeated, or parts of these joined. */
export function payload(spec: Json): Uint8Array {
  if ("parts" in spec) return concat((spec.parts as Json[]).map(payload));
  if ("repeat_base64" in spec) return concat(Array(Number(spec.times)).fill(Buffer.from(spec.repeat_base64 as string, "base64")));
  if ("text" in spec) return Uint8Array.from(Buffer.from(String(spec.text), "utf8"));
  if ("base64" in spec) return Uint8Array.from(Buffer.from(spec.base64 as string, "base64"));
  return Uint8Array.from(Buffer.from(String(spec.repeat).repeat(Number(spec.times)), "utf8"));
}

/** The vector's rows, repeated v.repeat times when it says so. */
export function rows(v: Json): Row[] {
  const one = (v.rows as Json[]).map(row);
  const out: Row[] = [];
  for (let i = 0; i < Number(v.repeat ?? 1); i++) out.push(...one);
  return out;
}

export function row(r: Json): Row {
  const out: Row = { queue: r.queue as string, payload: payload(r.payload) };
  if (r.key !== undefined) out.key = r.key as string;
  if (r.attributes !== undefined) out.attributes = { ...(r.attributes as Record<string, string>) };
  if (r.group !== undefined) out.group = r.group as string;
  if (r.not_before_ms !== undefined && r.not_before_ms !== null) out.notBefore = new Date(r.not_before_ms as number);
  if (r.trace_parent !== undefined) out.traceParent = r.trace_parent as string;
  return out;
}

export function config(c: Json): Config {
  return {
    table: c.table ?? "",
    shards: c.shards ?? 0,
    maxMessageBytes: c.max_message_bytes ?? 0,
    ordered: c.ordered ?? null,
    routes: c.routes ?? null,
    lean: c.lean ?? false,
  };
}

/** DynamoDB JSON as the vectors write it (B in base64) to the SDK's form (B as bytes), for a value, an item, or a transaction item. */
export function toSdk(v: Json): Json {
  if (Array.isArray(v)) return v.map(toSdk);
  if (typeof v === "object" && v !== null) {
    const keys = Object.keys(v);
    if (keys.length === 1 && typeof v.B === "string") return { B: Uint8Array.from(Buffer.from(v.B, "base64")) };
    if (keys.length === 1 && Array.isArray(v.BS)) return { BS: (v.BS as string[]).map((b) => Uint8Array.from(Buffer.from(b, "base64"))) };
    return Object.fromEntries(keys.map((k) => [k, toSdk(v[k])]));
  }
  return v;
}

/** The SDK's form back to the vectors' DynamoDB JSON. */
export function fromSdk(v: Json): Json {
  if (v instanceof Uint8Array) return Buffer.from(v).toString("base64");
  if (Array.isArray(v)) return v.map(fromSdk);
  if (typeof v === "object" && v !== null) return Object.fromEntries(Object.keys(v).map((k) => [k, fromSdk(v[k])]));
  return v;
}

/** expr without whitespace outside double-quoted strings. */
export function canonical(expr: string): string {
  let out = "";
  let quoted = false;
  let escaped = false;
  for (const ch of expr) {
    if (quoted) {
      out += ch;
      if (escaped) escaped = false;
      else if (ch === "\\") escaped = true;
      else if (ch === '"') quoted = false;
    } else if (ch === '"') {
      quoted = true;
      out += ch;
    } else if (!/\s/.test(ch)) {
      out += ch;
    }
  }
  return out;
}

/**
 * An expression with its placeholders replaced (#n by the name, :v by the
 * value: a string quoted as JSON, a number as it is), without whitespace
 * outside strings: what the vectors compare.
 */
export function resolve(expr: string, names: Record<string, string> | undefined, values: Json): string {
  const out = expr.replace(/[#:][A-Za-z0-9_]+/g, (tok) => {
    if (tok.startsWith("#")) {
      const name = names?.[tok];
      assert.ok(name !== undefined, `${tok} is named`);
      return name;
    }
    const v = values?.[tok];
    assert.ok(v !== undefined, `${tok} has a value`);
    return "S" in v ? JSON.stringify(v.S) : String(v.N);
  });
  return canonical(out);
}

/** A transaction item as the vectors compare it: the table, the item or key in DynamoDB JSON, the expressions resolved, the return values. */
export function shape(item: Json): Json {
  const ops = Object.keys(item).filter((k) => item[k] !== undefined);
  assert.equal(ops.length, 1, "one operation per transaction item");
  const op = ops[0] as string;
  const body = item[op];
  const out: Json = { TableName: body.TableName };
  if (body.Item !== undefined) out.Item = fromSdk(body.Item);
  if (body.Key !== undefined) out.Key = fromSdk(body.Key);
  const names = body.ExpressionAttributeNames as Record<string, string> | undefined;
  const values = fromSdk(body.ExpressionAttributeValues);
  for (const field of ["ConditionExpression", "UpdateExpression"]) {
    if (body[field] !== undefined) out[field] = resolve(body[field] as string, names, values);
  }
  if (body.ReturnValuesOnConditionCheckFailure !== undefined) out.ReturnValuesOnConditionCheckFailure = body.ReturnValuesOnConditionCheckFailure;
  return { [op]: out };
}

/** A vector's expected transaction item, its expressions canonical. */
export function expectedShape(item: Json): Json {
  const [op, body] = Object.entries(item)[0] as [string, Json];
  const out = { ...body };
  for (const field of ["ConditionExpression", "UpdateExpression"]) {
    if (out[field] !== undefined) out[field] = canonical(out[field] as string);
  }
  return { [op]: out };
}

export const STAGE_ID = /^[A-Z2-7]{16}$/;
export const ULID = /^[0-7][0-9A-HJKMNP-TV-Z]{25}$/;

/**
 * Checks a stored item's created_at, due_at and stage_id by their rules,
 * then takes the expected values where the vector leaves them open ("*"),
 * so the rest compares exactly.
 */
export function checkVolatile(actual: Json, expected: Json): void {
  assert.match(actual.stage_id.S as string, STAGE_ID);
  const created = Number(actual.created_at.N);
  const notBefore = Number(actual.not_before?.N ?? "0");
  assert.equal(Number(actual.due_at.N), Math.max(created, notBefore));
  for (const name of ["created_at", "due_at", "stage_id"]) {
    const e = expected[name];
    if (e !== undefined && Object.values(e).includes("*")) actual[name] = { ...e };
  }
}

const POLICY = {
  gaps: { wait: GapPolicy.Wait, pass: GapPolicy.Pass },
  late: { record: LatePolicy.Record, apply: LatePolicy.Apply },
  join: { from_start: JoinPolicy.FromStart, where_seen: JoinPolicy.WhereSeen },
} as const;

/** An Inbox's options as the inbox and poller scenarios give them (their config). */
export function inboxOptions(config: { gaps: string; late: string; join: string }): InboxOptions {
  return {
    gaps: POLICY.gaps[config.gaps as "wait" | "pass"],
    late: POLICY.late[config.late as "record" | "apply"],
    join: POLICY.join[config.join as "from_start" | "where_seen"],
  };
}
