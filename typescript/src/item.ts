/**
 * The stored form of a row (Go's internal/dynamo codec, shard and size): the
 * item format docs/other-languages.md describes.
 */

import { createHash, randomBytes } from "node:crypto";
import type { AttributeValue } from "@aws-sdk/client-dynamodb";

/** A DynamoDB item, as the AWS SDK for JavaScript v3 writes it. */
export type Item = Record<string, AttributeValue>;

// Attribute names of a row's item.
export const PK = "pk";
export const QUEUE = "queue";
export const PAYLOAD = "payload";
export const ATTRIBUTES = "attributes";
export const GROUP = "group";
export const NOT_BEFORE = "not_before";
export const SEQ = "seq";
export const PREV = "prev";
export const TAIL = "tail";
export const STATUS = "status";
export const ATTEMPT = "attempt";
export const CREATED_AT = "created_at";
export const DUE_AT = "due_at";
export const SHARD = "shard";
export const STAGE_ID = "stage_id";
export const ERRORS = "errors";
/** A tombstone's digest of the payload and attributes its settle dropped (Go: dynamo.AttrContent; contentDigest says how it is made). */
export const CONTENT = "content";

export const STATUS_PENDING = "pending";
export const CONFIG_KEY = "config dispatcher";
export const AUDIT_KEY = "audit due";
const DEAD_QUEUE_NONE = "(none)";

// Size limits (Go: dynamo.ItemLimit, Growth).
export const ITEM_LIMIT = 400_000;
const MAX_ERROR_BYTES = 512;
const ERROR_HISTORY = 5;
const NUM_MAX = 22;

/** The attributes Outflow adds to a row after staging, for which staging leaves room (growth): not counted in a row's own size. */
const DELIVERY_STATE: ReadonlySet<string> = new Set([
  "claim_token",
  "lease_until",
  "claimed_at",
  ERRORS,
  "last_error",
  "failed_at",
  "dead_queue",
  "unsure_at",
  "done_at",
  "expires_at",
  "redriven_at",
  "place_maybe_closed",
]);

const encoder = new TextEncoder();
const strictUtf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** The UTF-8 length of s. */
export function utf8Len(s: string): number {
  return Buffer.byteLength(s, "utf8");
}

export function utf8(s: string): Uint8Array {
  return encoder.encode(s);
}

/** p as text when it is valid UTF-8, else null. */
export function decodeUtf8(p: Uint8Array): string | null {
  try {
    return strictUtf8.decode(p);
  } catch {
    return null;
  }
}

/** The key of an ordered group's item. */
export function groupKey(queue: string, group: string): string {
  return `group ${queue} ${group}`;
}

export function reservedKey(key: string): boolean {
  return key === CONFIG_KEY || key === AUDIT_KEY || key.startsWith("group ");
}

export function fnv1a32(data: Uint8Array): number {
  let h = 0x811c9dc5;
  for (const b of data) {
    h ^= b;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

/** The due-index partition of a key: FNV-1a-32 of it, mod shards. */
export function shardOf(key: string, shards: number): string {
  return String(fnv1a32(utf8(key)) % shards);
}

function deadQueue(queue: string): string {
  return queue && utf8Len(queue) <= 1024 ? queue : DEAD_QUEUE_NONE;
}

/** The most a staged row's item can grow over its life (Go: Growth). */
export function growth(queue: string): number {
  const entry = 1 + 3 + "at".length + NUM_MAX + "attempt".length + NUM_MAX + "message".length + MAX_ERROR_BYTES + 3 + "unsure".length + 2;
  const claim = "claim_token".length + 26 + "lease_until".length + NUM_MAX + "claimed_at".length + NUM_MAX + ATTEMPT.length + NUM_MAX;
  return (
    claim +
    STATUS.length +
    STATUS_PENDING.length +
    ERRORS.length +
    3 +
    (ERROR_HISTORY + 1) * entry +
    "last_error".length +
    MAX_ERROR_BYTES +
    "failed_at".length +
    NUM_MAX +
    "dead_queue".length +
    utf8Len(deadQueue(queue)) +
    "unsure_at".length +
    NUM_MAX +
    "done_at".length +
    NUM_MAX +
    "expires_at".length +
    NUM_MAX +
    "redriven_at".length +
    NUM_MAX +
    "place_maybe_closed".length +
    NUM_MAX
  );
}

/** A value's size as DynamoDB counts it (numbers: their text plus one). */
export function valueSize(v: AttributeValue): number {
  if (v.S !== undefined) return utf8Len(v.S);
  if (v.N !== undefined) return v.N.length + 1;
  if (v.B !== undefined) return v.B.length;
  if (v.BOOL !== undefined || v.NULL !== undefined) return 1;
  if (v.L !== undefined) return 3 + v.L.reduce((n, e) => n + 1 + valueSize(e), 0);
  if (v.M !== undefined) return 3 + itemSize(v.M) + Object.keys(v.M).length;
  if (v.SS !== undefined) return 3 + v.SS.reduce((n, e) => n + 1 + utf8Len(e), 0);
  if (v.NS !== undefined) return 3 + v.NS.reduce((n, e) => n + 2 + e.length, 0);
  if (v.BS !== undefined) return 3 + v.BS.reduce((n, e) => n + 1 + e.length, 0);
  return 0;
}

export function itemSize(item: Item): number {
  let n = 0;
  for (const [name, v] of Object.entries(item)) n += utf8Len(name) + valueSize(v);
  return n;
}

/** An item's size without the delivery state growth makes room for. */
export function baseSize(item: Item): number {
  let n = 0;
  for (const [name, v] of Object.entries(item)) if (!DELIVERY_STATE.has(name)) n += utf8Len(name) + valueSize(v);
  return n;
}

/** A payload as stored: S for UTF-8 text, B otherwise. */
export function payloadValue(payload: Uint8Array): AttributeValue {
  const text = decodeUtf8(payload);
  return text !== null ? { S: text } : { B: payload };
}

const BASE32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

/** 16 base32 characters, 80 random bits, as Outflow's stagers write. */
export function newStageId(): string {
  let out = "";
  for (const b of randomBytes(16)) out += BASE32[b % 32];
  return out;
}

const CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/** A ULID: ms's 48 bits and 80 random bits, Crockford base32. */
export function newUlid(ms: number): string {
  const random = BigInt("0x" + randomBytes(10).toString("hex"));
  const n = ((BigInt(ms) & ((1n << 48n) - 1n)) << 80n) | random;
  let out = "";
  for (let i = 25; i >= 0; i--) out += CROCKFORD[Number((n >> BigInt(5 * i)) & 31n)];
  return out;
}

/**
 * What a producer chose for a row (Go: dynamo.SameContent compares it): queue, payload, attributes without the trace
 * context, group and delay. A tombstone (dropped) has no payload or attributes left, only their digest: sameContent
 * compares it by that.
 */
export interface Content {
  queue: string;
  payload: Uint8Array;
  attributes: Record<string, string>;
  group: string;
  notBeforeMs: number;
  /** The stored digest (the item's content), "" or absent when it has none. */
  digest?: string;
  /** A tombstone whose settle dropped the payload and attributes (Go: dynamo's dropped): a digest, and neither a payload nor attributes. */
  dropped?: boolean;
}

const TRACE_PARENT = "traceparent";

function lengthPrefix(n: number): Uint8Array {
  const b = new Uint8Array(8);
  new DataView(b.buffer).setBigUint64(0, BigInt(n), false);
  return b;
}

/**
 * Go's dynamo.ContentDigest, what a tombstone keeps of the payload and attributes its settle dropped: "sha256:" and
 * the lower-case hex SHA-256 of the payload, then of each attribute but the trace context, in ascending byte order of
 * its UTF-8 name (not JavaScript's UTF-16 order), its name and its value (UTF-8), each of these byte strings preceded
 * by its length as an unsigned 64-bit big-endian integer.
 */
export function contentDigest(payload: Uint8Array, attributes: Record<string, string> | undefined): string {
  const h = createHash("sha256");
  const field = (b: Uint8Array): void => {
    h.update(lengthPrefix(b.length));
    h.update(b);
  };
  field(payload);
  const named = Object.entries(attributes ?? {})
    .filter(([k]) => k !== TRACE_PARENT)
    .map(([k, v]) => [Buffer.from(k, "utf8"), Buffer.from(v, "utf8")] as const)
    .sort((x, y) => Buffer.compare(x[0], y[0]));
  for (const [name, value] of named) {
    field(name);
    field(value);
  }
  return "sha256:" + h.digest("hex");
}

function digestOf(c: Content): string {
  return c.dropped === true ? (c.digest ?? "") : contentDigest(c.payload, c.attributes);
}

/**
 * Go's dynamo.SameContent: queue, group and delay alike, and the payload and attributes (trace context aside) alike,
 * compared by their digest when either is a tombstone that dropped them, else as they are (a done row written before
 * tombstones dropped them keeps its payload).
 */
export function sameContent(a: Content, b: Content): boolean {
  if (a.queue !== b.queue || a.group !== b.group || a.notBeforeMs !== b.notBeforeMs) return false;
  if (a.dropped === true || b.dropped === true) return digestOf(a) === digestOf(b);
  if (!Buffer.from(a.payload).equals(Buffer.from(b.payload))) return false;
  const ka = Object.keys(a.attributes);
  if (ka.length !== Object.keys(b.attributes).length) return false;
  return ka.every((k) => Object.hasOwn(b.attributes, k) && b.attributes[k] === a.attributes[k]);
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null;
}

function str(v: unknown): string | undefined {
  return isRecord(v) && typeof v["S"] === "string" ? v["S"] : undefined;
}

/** A staged item's content; null when it has no key (not a row). */
export function contentOf(item: Record<string, unknown>): Content | null {
  if (str(item[PK]) === undefined) return null;
  const payload = item[PAYLOAD];
  let raw: Uint8Array = new Uint8Array();
  let hasPayload = false;
  const text = str(payload);
  if (text !== undefined) {
    raw = utf8(text);
    hasPayload = true;
  } else if (isRecord(payload) && payload["B"] instanceof Uint8Array) {
    raw = payload["B"];
    hasPayload = true;
  }
  const attrs: Record<string, string> = {};
  const m = item[ATTRIBUTES];
  const hasAttributes = isRecord(m) && isRecord(m["M"]);
  if (isRecord(m) && isRecord(m["M"])) {
    for (const [k, v] of Object.entries(m["M"])) {
      const s = str(v);
      if (s !== undefined) setOwn(attrs, k, s);
    }
  }
  delete attrs[TRACE_PARENT];
  const nb = item[NOT_BEFORE];
  let notBefore = 0;
  if (isRecord(nb) && typeof nb["N"] === "string" && /^[+-]?[0-9]+$/.test(nb["N"].trim())) notBefore = Number(nb["N"]);
  const digest = str(item[CONTENT]) ?? "";
  const dropped = digest !== "" && !hasPayload && !hasAttributes;
  return { queue: str(item[QUEUE]) ?? "", payload: raw, attributes: attrs, group: str(item[GROUP]) ?? "", notBeforeMs: notBefore, digest, dropped };
}

/** The row key of an item that stages a row: one with a string pk and queue, a payload and a status; "" for anything else. */
export function stagedRowKey(item: Record<string, unknown>): string {
  for (const name of [PK, QUEUE, STATUS]) if (str(item[name]) === undefined) return "";
  const p = item[PAYLOAD];
  if (!isRecord(p) || !(typeof p["S"] === "string" || p["B"] !== undefined)) return "";
  return str(item[PK]) ?? "";
}

/**
 * Sets obj[key] to value as an own, enumerable property, whatever the key: plain assignment of "__proto__" would call
 * the prototype's setter instead, and an attribute of that name (a valid SQS name) would be lost from counts, sizes and
 * items in silence.
 */
export function setOwn<T>(obj: Record<string, T>, key: string, value: T): void {
  Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
}
