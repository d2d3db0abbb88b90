/** What a route's target accepts: the dispatcher's checks (Go's internal/target), applied at staging. */

import { ConfigError, InvalidRowError } from "./errors.js";
import { decodeUtf8, setOwn, utf8Len } from "./item.js";

// Message attributes Outflow sets on every message.
export const ATTR_KEY = "outflow.key";
export const ATTR_ATTEMPT = "outflow.attempt";
export const ATTR_ENCODING = "outflow.encoding";
export const ATTR_SEQ = "outflow.seq";
/** The mark of a copy sent after an operator's redrive, and its value. */
const ATTR_REDRIVEN = "outflow.redriven";
const REDRIVEN_VALUE = "1";
export const ATTR_TRACE_PARENT = "traceparent";

export const MAX_ATTRIBUTES = 10;
export const MAX_MESSAGE_BYTES = 256 * 1024;
const MAX_SNS_BYTES = 256 * 1024;
const MAX_ID = 128;

const MAX_EVENT_BYTES = 256 * 1024 - 1;
const MAX_SOURCE_CHARS = 256;
const MAX_DETAIL_TYPE_CHARS = 128;
const MAX_DETAIL_DEPTH = 1000;
const ATTR_SOURCE = "source";
const ATTR_DETAIL_TYPE = "detail-type";
const MEMBER_OUTFLOW = "outflow";

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

export type TargetKind = "SQS" | "SNS" | "EventBridge";

/** Where a route delivers, read from its target string. */
export interface Target {
  kind: TargetKind;
  address: string;
  fifo: boolean;
  source: string;
  detailType: string;
}

export function sqsTarget(fifo = false): Target {
  return { kind: "SQS", address: "", fifo, source: "", detailType: "" };
}

export function fifoRoute(queue: string): boolean {
  return queue.endsWith(".fifo");
}

const TOPIC_ARN = /^arn:aws[a-z-]*:sns:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_-]+(\.fifo)?$/;
const BUS_ARN = /^arn:aws[a-z-]*:events:[a-z0-9-]+:[0-9]{12}:event-bus\/([A-Za-z0-9._/-]{1,256})$/;
const BUS_NAME = /^[A-Za-z0-9._-]{1,256}$/;
const QUEUE_NAME = /^(?:[A-Za-z0-9_-]{1,80}|[A-Za-z0-9_-]{1,75}\.fifo)$/;

function bad(message: string): ConfigError {
  return new ConfigError("invalid_config", message);
}

function repr(s: string): string {
  return JSON.stringify(s);
}

/** Splits "a?b" at the first "?" as Python's str.partition. */
function partition(s: string, sep: string): [string, boolean, string] {
  const i = s.indexOf(sep);
  return i < 0 ? [s, false, ""] : [s.slice(0, i), true, s.slice(i + sep.length)];
}

/** Percent-decodes s to bytes: a valid %XX is its byte, anything else stays as it is. */
function unquoteToBytes(s: string): Uint8Array {
  const bytes = Buffer.from(s, "utf8");
  const out: number[] = [];
  const hex = (c: number | undefined): number => {
    if (c === undefined) return -1;
    if (c >= 0x30 && c <= 0x39) return c - 0x30;
    if (c >= 0x41 && c <= 0x46) return c - 0x41 + 10;
    if (c >= 0x61 && c <= 0x66) return c - 0x61 + 10;
    return -1;
  };
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i] as number;
    const hi = hex(bytes[i + 1]);
    const lo = hex(bytes[i + 2]);
    if (b === 0x25 && hi >= 0 && lo >= 0) {
      out.push(hi * 16 + lo);
      i += 2;
    } else {
      out.push(b);
    }
  }
  return Uint8Array.from(out);
}

const lenient = new TextDecoder("utf-8", { ignoreBOM: true });

/** The parts of a URL Python's urlsplit gives, as far as the queue check needs them; null when it cannot be split. */
function urlSplit(raw: string): { scheme: string; netloc: string; path: string } | null {
  const url = raw.replace(/[\t\r\n]/g, "");
  let rest = url;
  let scheme = "";
  const m = /^([A-Za-z][A-Za-z0-9+.-]*):/.exec(url);
  if (m?.[1] !== undefined) {
    scheme = m[1].toLowerCase();
    rest = url.slice(m[0].length);
  }
  let netloc = "";
  if (rest.startsWith("//")) {
    const end = rest.slice(2).search(/[/?#]/);
    netloc = end < 0 ? rest.slice(2) : rest.slice(2, 2 + end);
    rest = end < 0 ? "" : rest.slice(2 + end);
    if (netloc.includes("[") !== netloc.includes("]")) return null;
  }
  const end = rest.search(/[?#]/);
  return { scheme, netloc, path: end < 0 ? rest : rest.slice(0, end) };
}

/**
 * Reads a route's target: an SQS queue URL, an SNS topic ARN, or an
 * EventBridge bus ARN or name with "?source=S&detail-type=D".
 */
export function parseTarget(s: string): Target {
  const [address, hasOptions, options] = partition(s, "?");
  let byName = false;
  let t: Target;
  if (address.startsWith("arn:") && address.includes(":sns:")) {
    if (!TOPIC_ARN.test(address) || address.slice(address.lastIndexOf(":") + 1).length > 256) {
      throw bad(`${repr(address)} is not an SNS topic ARN`);
    }
    t = { kind: "SNS", address, fifo: address.endsWith(".fifo"), source: "", detailType: "" };
  } else if (address.startsWith("arn:") && address.includes(":events:")) {
    if (!BUS_ARN.test(address)) throw bad(`${repr(address)} is not an EventBridge event bus ARN`);
    t = { kind: "EventBridge", address, fifo: false, source: "", detailType: "" };
  } else if (address.includes("://")) {
    const badUrl = bad(`${repr(address)} is not a queue URL (http or https, no credentials or fragment, ending in the queue's name)`);
    const u = urlSplit(address);
    if (u === null || (u.scheme !== "http" && u.scheme !== "https") || !u.netloc || u.netloc.includes("@") || address.includes("#")) {
      throw badUrl;
    }
    const path = lenient.decode(unquoteToBytes(u.path));
    const name = path.slice(path.lastIndexOf("/") + 1);
    if (!QUEUE_NAME.test(name)) throw badUrl;
    t = { kind: "SQS", address, fifo: name.endsWith(".fifo"), source: "", detailType: "" };
  } else if (BUS_NAME.test(address)) {
    t = { kind: "EventBridge", address, fifo: false, source: "", detailType: "" };
    byName = true;
  } else {
    throw bad(`${repr(address)} is not a queue URL, a topic ARN or an event bus ARN or name`);
  }
  if (hasOptions && t.kind !== "EventBridge") throw bad(`${repr(s)}: only EventBridge routes take options`);
  const [source, detailType] = readOptions(s, options);
  t = { ...t, source, detailType };
  if (byName && !source && !detailType) {
    throw bad(`${repr(s)}: a bus given by name needs its options (${address}?source=S&detail-type=D) or its ARN`);
  }
  return t;
}

const BAD_ESCAPE = /%(?![0-9A-Fa-f]{2})/;

function readOptions(s: string, options: string): [string, string] {
  const seen = new Map<string, string>();
  for (const opt of options.split("&")) {
    if (!opt) continue;
    const [name, , raw] = partition(opt, "=");
    if (BAD_ESCAPE.test(raw)) throw bad(`${repr(s)}: option ${name}: invalid URL escape`);
    const value = lenient.decode(unquoteToBytes(raw));
    if (!value || seen.has(name)) throw bad(`${repr(s)}: option ${name} wants one non-empty value`);
    if (name !== ATTR_SOURCE && name !== ATTR_DETAIL_TYPE) throw bad(`${repr(s)}: unknown option ${repr(name)} (want source or detail-type)`);
    seen.set(name, value);
  }
  const source = seen.get(ATTR_SOURCE) ?? "";
  const detailType = seen.get(ATTR_DETAIL_TYPE) ?? "";
  for (const problem of [checkSource(source), checkDetailType(detailType)]) {
    if (problem !== null) throw bad(`${repr(s)}: ${problem}`);
  }
  return [source, detailType];
}

/**
 * Reads routes, "name=target,name=target" as OUTFLOW_ROUTES or a record, into
 * their targets. A name ends in .fifo exactly when its target is a FIFO
 * queue or topic.
 */
export function parseRoutes(routes: string | Readonly<Record<string, string>>): Map<string, Target> {
  const pairs: [string, string][] = [];
  if (typeof routes === "string") {
    for (let part of routes.split(",")) {
      part = part.trim();
      if (!part) continue;
      const [n, eq, r] = partition(part, "=");
      const name = n.trim();
      const raw = r.trim();
      if (!eq || !name || !raw) throw bad(`route ${repr(part)}: want name=target`);
      pairs.push([name, raw]);
    }
  } else {
    pairs.push(...Object.entries(routes));
  }
  const out = new Map<string, Target>();
  for (const [name, raw] of pairs) {
    if (!name || !raw) throw bad(`route ${repr(name)}: want a name and a target`);
    let t: Target;
    try {
      t = parseTarget(raw);
    } catch (e) {
      throw bad(`route ${repr(name)}: ${(e as Error).message}`);
    }
    if (t.fifo !== name.endsWith(".fifo")) {
      throw bad(`route ${repr(name)}: a route name ends in .fifo exactly when its queue or topic is FIFO`);
    }
    if (out.has(name)) throw bad(`route ${repr(name)}: given twice`);
    out.set(name, t);
  }
  return out;
}

/** A valid FIFO message group or deduplication id: 1-128 printable ASCII characters without spaces. */
export function validId(s: string): boolean {
  if (s.length === 0 || s.length > MAX_ID) return false;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

function sqsChars(text: string): boolean {
  for (const ch of text) {
    const r = ch.codePointAt(0) as number;
    if (!(r === 0x9 || r === 0xa || r === 0xd || (r >= 0x20 && r <= 0xd7ff) || (r >= 0xe000 && r <= 0xfffd) || (r >= 0x10000 && r <= 0x10ffff))) {
      return false;
    }
  }
  return true;
}

/** The message body for a payload, and whether it is base64. */
export function body(payload: Uint8Array): [string, boolean] {
  const text = payload.length > 0 ? decodeUtf8(payload) : null;
  if (text !== null && sqsChars(text)) return [text, false];
  return [Buffer.from(payload).toString("base64"), true];
}

const NAME_CHARS = /^[A-Za-z0-9_.-]*$/;

function attributeName(name: string): void {
  const badName = (why: string) => new InvalidRowError("attribute_name", `invalid message attribute name: ${repr(name)} ${why}`);
  const lower = name.toLowerCase();
  if (!name || utf8Len(name) > 256) throw badName("must be 1-256 characters");
  if (lower.startsWith("outflow.")) throw badName("uses the reserved outflow. prefix");
  if (lower.startsWith("aws.") || lower.startsWith("amazon.")) throw badName("uses a prefix reserved by AWS");
  if (name.startsWith(".") || name.endsWith(".") || name.includes("..")) {
    throw badName("may not start or end with a period or hold two in a row");
  }
  if (!NAME_CHARS.test(name)) throw badName("may hold only letters, digits, underscores, hyphens and periods");
}

/** Sorted as Python and Go sort strings: by code point. */
function byCodePoint(a: string, b: string): number {
  const x = [...a];
  const y = [...b];
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    const d = (x[i]?.codePointAt(0) ?? 0) - (y[i]?.codePointAt(0) ?? 0);
    if (d !== 0) return d;
  }
  return x.length - y.length;
}

/** The attribute rules every target shares: SQS's names and values, outside the outflow. prefix. */
export function checkAttributes(attrs: Readonly<Record<string, string>>): void {
  for (const k of Object.keys(attrs).sort(byCodePoint)) {
    attributeName(k);
    const v = attrs[k] ?? "";
    if (!v || !sqsChars(v)) {
      throw new InvalidRowError("attribute_value", `invalid message attribute value: ${repr(k)} must be non-empty text of characters SQS allows`);
    }
  }
}

function attrType(name: string): string {
  return name === ATTR_ATTEMPT || name === ATTR_SEQ ? "Number" : "String";
}

function sizeLimit(t: Target, maxBytes: number): [number, string] {
  const limit = maxBytes > 0 ? maxBytes : MAX_MESSAGE_BYTES;
  if (t.kind === "SNS") return [Math.min(limit, MAX_SNS_BYTES), "SNS's "];
  return [limit, "the "];
}

function checkMessage(
  key: string,
  payload: Uint8Array,
  attributes: Readonly<Record<string, string>>,
  group: string,
  attempt: number,
  seq: bigint,
  fifo: boolean,
  limit: number,
  whose: string,
): void {
  if (payload.length === 0) {
    throw new InvalidRowError("empty_payload", "empty payload: SQS and SNS need a message body of at least one character");
  }
  const [text, binary] = body(payload);
  const attrs: Record<string, string> = { [ATTR_KEY]: key, [ATTR_ATTEMPT]: String(attempt) };
  if (binary) attrs[ATTR_ENCODING] = "base64";
  if (seq > 0n) attrs[ATTR_SEQ] = seq.toString();
  checkAttributes(attributes);
  for (const [k, v] of Object.entries(attributes)) setOwn(attrs, k, v);
  const count = Object.keys(attrs).length;
  if (count > MAX_ATTRIBUTES) {
    throw new InvalidRowError(
      "too_many_attributes",
      `too many message attributes: ${count} with Outflow's own, SQS allows ${MAX_ATTRIBUTES} (and SNS passes on)`,
    );
  }
  let size = utf8Len(text);
  for (const [k, v] of Object.entries(attrs)) size += utf8Len(k) + attrType(k).length + utf8Len(v);
  // A row of an ordered route is checked as its redriven copy, with the mark the dispatcher adds (Go's target.Validate).
  if (seq > 0n) {
    if (count >= MAX_ATTRIBUTES) {
      throw new InvalidRowError(
        "too_many_attributes",
        `too many message attributes: ${count + 1} with Outflow's own and ${ATTR_REDRIVEN}, SQS allows ${MAX_ATTRIBUTES} (and SNS passes on)`,
      );
    }
    size += ATTR_REDRIVEN.length + attrType(ATTR_REDRIVEN).length + REDRIVEN_VALUE.length;
  }
  if (fifo) {
    if (!group) throw new InvalidRowError("group_required", "a FIFO queue needs a message group, and the row has none");
    if (!validId(group)) {
      throw new InvalidRowError("invalid_id", `invalid FIFO group or deduplication id: group ${repr(group)} must be 1-128 ASCII letters, digits or punctuation`);
    }
    if (!validId(key)) {
      throw new InvalidRowError("invalid_id", `invalid FIFO group or deduplication id: key ${repr(key)} must be 1-128 ASCII letters, digits or punctuation`);
    }
  }
  if (size > limit) throw new InvalidRowError("too_large", `message too large: ${size} bytes with attributes, over ${whose}${limit}-byte limit`);
}

function checkSource(source: string): string | null {
  if ([...source].length > MAX_SOURCE_CHARS) return `invalid event field: a source holds at most ${MAX_SOURCE_CHARS} characters`;
  if (source.startsWith("aws.")) return `invalid event field: source ${repr(source)}: sources starting with aws. are AWS's own`;
  return null;
}

function checkDetailType(detailType: string): string | null {
  if ([...detailType].length > MAX_DETAIL_TYPE_CHARS) return `invalid event field: a detail-type holds at most ${MAX_DETAIL_TYPE_CHARS} characters`;
  return null;
}

/** A JSON string as Go's encoding/json writes it: HTML characters and the line and paragraph separators escaped. */
function goString(s: string): string {
  return JSON.stringify(s)
    .replaceAll("<", "\\u003c")
    .replaceAll(">", "\\u003e")
    .replaceAll("&", "\\u0026")
    .replaceAll("\u2028", "\\u2028")
    .replaceAll("\u2029", "\\u2029");
}

function checkEvent(key: string, payload: Uint8Array, attributes: Readonly<Record<string, string>>, attempt: number, t: Target): void {
  checkAttributes(attributes);
  const attrs = new Map(Object.entries(attributes));
  const source = attrs.get(ATTR_SOURCE) ?? t.source;
  const detailType = attrs.get(ATTR_DETAIL_TYPE) ?? t.detailType;
  attrs.delete(ATTR_SOURCE);
  attrs.delete(ATTR_DETAIL_TYPE);
  if (!source) {
    throw new InvalidRowError("event_field", "invalid event field: no source: set the row's source attribute or the route's source option");
  }
  if (!detailType) {
    throw new InvalidRowError("event_field", "invalid event field: no detail-type: set the row's detail-type attribute or the route's detail-type option");
  }
  for (const problem of [checkSource(source), checkDetailType(detailType)]) {
    if (problem !== null) throw new InvalidRowError("event_field", problem);
  }
  // The outflow member, written as Go writes it: key, attempt, traceparent, attributes (sorted).
  let meta = `{"key":${goString(key)},"attempt":${attempt}`;
  const trace = attrs.get(ATTR_TRACE_PARENT) ?? "";
  attrs.delete(ATTR_TRACE_PARENT);
  if (trace) meta += `,"traceparent":${goString(trace)}`;
  if (attrs.size > 0) {
    const members = [...attrs.keys()].sort(byCodePoint).map((k) => `${goString(k)}:${goString(attrs.get(k) ?? "")}`);
    meta += `,"attributes":{${members.join(",")}}`;
  }
  meta += "}";
  const detail = eventDetailSize(payload, utf8Len(meta));
  const size = utf8Len(source) + utf8Len(detailType) + detail;
  if (size > MAX_EVENT_BYTES) {
    throw new InvalidRowError(
      "too_large",
      `message too large: ${size} bytes of source, detail-type and detail, over EventBridge's ${MAX_EVENT_BYTES}-byte limit`,
    );
  }
}

function notJson(why: string): InvalidRowError {
  return new InvalidRowError("not_json", "payload is not a JSON object: " + why);
}

/** The size of the detail: the outflow member first and the payload's bytes as they are. */
function eventDetailSize(payload: Uint8Array, metaBytes: number): number {
  let start = 0;
  while (start < payload.length && [0x20, 0x09, 0x0d, 0x0a].includes(payload[start] as number)) start++;
  const text = decodeUtf8(payload);
  if (text === null || start >= payload.length || payload[start] !== 0x7b) throw notJson("an EventBridge event's detail must be one");
  const members = checkDetail(text);
  // {"outflow": meta [,] then the payload after its "{"
  return '{"outflow":'.length + metaBytes + (members > 0 ? 1 : 0) + (payload.length - start - 1);
}

const WS = " \t\r\n";
const NUMBER = /-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/y;

/** The end of the JSON string that starts at text[i] (a '"'), or -1 when it is not one. */
function stringEnd(text: string, i: number): number {
  let j = i + 1;
  while (j < text.length) {
    const c = text.charCodeAt(j);
    if (c === 0x22) return j + 1;
    if (c < 0x20) return -1;
    if (c === 0x5c) {
      const e = text[j + 1];
      if (e !== undefined && '"\\/bfnrt'.includes(e)) {
        j += 2;
      } else if (e === "u" && /^[0-9a-fA-F]{4}$/.test(text.slice(j + 2, j + 6))) {
        j += 6;
      } else {
        return -1;
      }
      continue;
    }
    j++;
  }
  return -1;
}

/**
 * Reads a JSON object as PutEvents will and returns its member count: one
 * whole JSON value, nested at most 1000 deep, whose integers fit in 64 bits,
 * without a top-level outflow member.
 */
export function checkDetail(text: string): number {
  let i = 0;
  const n = text.length;
  const stack: string[] = []; // "{" or "["
  let members = 0;
  let expect: "value" | "key" | "colon" | "next" = "value";
  let first = false; // the container just opened: it may close at once
  let done = false;
  const top = () => stack[stack.length - 1];
  for (;;) {
    while (i < n && WS.includes(text[i] as string)) i++;
    if (i >= n) {
      if (done) return members;
      throw notJson("an EventBridge event's detail must be one: unexpected end of JSON input");
    }
    if (done) throw notJson("an EventBridge event's detail must be one, with nothing after it");
    const c = text[i] as string;
    if (expect === "next") {
      if (c === ",") {
        i++;
        expect = top() === "{" ? "key" : "value";
        first = false;
        continue;
      }
      if ((c === "}" && top() === "{") || (c === "]" && top() === "[")) {
        stack.pop();
        i++;
        if (stack.length === 0) done = true;
        continue;
      }
      throw notJson(`invalid character ${repr(c)} after a value`);
    }
    if (expect === "colon") {
      if (c !== ":") throw notJson(`invalid character ${repr(c)} after an object key`);
      i++;
      expect = "value";
      continue;
    }
    if (expect === "key") {
      if (c === "}" && first) {
        stack.pop();
        i++;
        if (stack.length === 0) done = true;
        expect = "next";
        continue;
      }
      const end = c === '"' ? stringEnd(text, i) : -1;
      if (end < 0) throw notJson(`invalid character ${repr(c)} looking for the beginning of an object key string`);
      if (stack.length === 1) {
        members++;
        if (JSON.parse(text.slice(i, end)) === MEMBER_OUTFLOW) {
          throw notJson('the payload has a top-level "outflow" member, which Outflow adds to every event');
        }
      }
      i = end;
      expect = "colon";
      continue;
    }
    // a value
    if (c === "]" && first && top() === "[") {
      stack.pop();
      i++;
      if (stack.length === 0) done = true;
      expect = "next";
      continue;
    }
    if (c === "{" || c === "[") {
      stack.push(c);
      if (stack.length > MAX_DETAIL_DEPTH) throw notJson(`nested deeper than the ${MAX_DETAIL_DEPTH} levels PutEvents reads`);
      i++;
      expect = c === "{" ? "key" : "value";
      first = true;
      continue;
    }
    first = false;
    if (c === '"') {
      const end = stringEnd(text, i);
      if (end < 0) throw notJson("invalid string");
      i = end;
    } else if (c === "-" || (c >= "0" && c <= "9")) {
      NUMBER.lastIndex = i;
      const m = NUMBER.exec(text);
      if (m === null) throw notJson("invalid number");
      if (m[1] === undefined && m[2] === undefined) {
        const v = BigInt(m[0]);
        if (v < INT64_MIN || v > INT64_MAX) throw notJson(`the integer ${m[0]} is past the 64-bit range PutEvents accepts`);
      }
      i += m[0].length;
    } else {
      const lit = ["true", "false", "null"].find((l) => text.startsWith(l, i));
      if (lit === undefined) throw notJson(`invalid character ${repr(c)} looking for beginning of value`);
      i += lit.length;
    }
    if (stack.length === 0) done = true;
    expect = "next";
  }
}

/** Why t would refuse the row, if it would. */
export function validateFor(
  key: string,
  payload: Uint8Array,
  attributes: Readonly<Record<string, string>>,
  group: string,
  attempt: number,
  seq: bigint,
  t: Target,
  maxBytes: number,
): void {
  if (t.kind === "EventBridge") {
    checkEvent(key, payload, attributes, attempt, t);
    return;
  }
  const [limit, whose] = sizeLimit(t, maxBytes);
  checkMessage(key, payload, attributes, group, attempt, seq, t.fifo, limit, whose);
}

const TRACE_PARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-[^\n]*)?$/;
const XRAY_ROOT = /^1-([0-9a-f]{8})-([0-9a-f]{24})$/;
const HEX16 = /^[0-9a-f]{16}$/;

/** Why s is not a W3C traceparent, if it is not. */
export function traceParentProblem(s: string): string | null {
  const m = TRACE_PARENT.exec(s);
  if (m === null || m[1] === "ff") return `${repr(s)} is not a W3C traceparent (version-traceid-parentid-flags in lower-case hex)`;
  if (m[1] === "00" && m[5] !== undefined) return `${repr(s)}: a version 00 traceparent has four fields`;
  if (m[2] === "0".repeat(32) || m[3] === "0".repeat(16)) return `${repr(s)}: the trace and parent ids may not be all zeros`;
  return null;
}

/** An X-Ray trace header as a W3C traceparent; "" when it has no Root and Parent. */
export function traceParentFromXray(header: string): string {
  let root = "";
  let parent = "";
  let sampled = "";
  for (const part of header.split(";")) {
    const [k, , v] = partition(part.trim(), "=");
    if (k === "Root") root = v;
    else if (k === "Parent") parent = v;
    else if (k === "Sampled") sampled = v;
  }
  const m = XRAY_ROOT.exec(root);
  if (m === null || !HEX16.test(parent)) return "";
  const tp = `00-${m[1]}${m[2]}-${parent}-${sampled === "1" ? "01" : "00"}`;
  return traceParentProblem(tp) === null ? tp : "";
}
