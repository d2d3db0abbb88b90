/**
 * Decoding what reached a consumer's queue: a queue route's message (and
 * an SNS topic's with raw delivery), SNS's JSON envelope, or an
 * EventBridge event, from a Lambda SQS record or an SDK ReceiveMessage
 * message (Go's FromLambda, FromQueue, FromSQS).
 *
 * A body is read as Go's encoding/json reads it into the consume
 * package's structs, so that a message one language accepts the others
 * accept alike: member names match case-insensitively, the last of
 * duplicates wins (null keeps a string or number as it was, two objects
 * for one map are merged), and a member of the wrong type makes the body
 * unreadable.
 */

import { ATTR_ATTEMPT, ATTR_ENCODING, ATTR_KEY, ATTR_SEQ, ATTR_TRACE_PARENT } from "../target.js";
import { goString, parse, structMembers, type Node } from "./json.js";
import { DecodeError, Envelope, type Message } from "./message.js";

/** The attribute that carries a message closing a place (Go's target.AttrClosed). */
export const ATTR_CLOSED = "outflow.closed";
/** Marks every copy of a row an operator redrove; any value (Outflow sends "1"). */
export const ATTR_REDRIVEN = "outflow.redriven";
const ATTR_SOURCE = "source";
const ATTR_DETAIL_TYPE = "detail-type";
const MEMBER_OUTFLOW = "outflow";
/** The SQS system attribute that holds a FIFO message's group. */
export const GROUP_ATTRIBUTE = "MessageGroupId";

const NOT_ENVELOPE = `no ${ATTR_KEY} attribute, and the body is not an SNS envelope or an EventBridge event`;
const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

/**
 * A record of the SQS event Lambda gives a function subscribed to a queue,
 * as far as decoding reads it (`SQSRecord` of @types/aws-lambda is one).
 */
export interface LambdaSQSRecord {
  readonly messageId?: string | undefined;
  readonly receiptHandle?: string | undefined;
  readonly body?: string | undefined;
  /** The system attributes; MessageGroupId on a FIFO queue. */
  readonly attributes?: { readonly MessageGroupId?: string | null | undefined } | null | undefined;
  /** The message attributes: Outflow's and the row's are String and Number ones. */
  readonly messageAttributes?: Readonly<Record<string, { readonly stringValue?: string | null | undefined } | null | undefined>> | null | undefined;
  /** The queue's ARN: it, named .fifo or not, says whether the queue keeps an order. */
  readonly eventSourceARN?: string | undefined;
}

/**
 * A message SQS's ReceiveMessage returned (`Message` of
 * @aws-sdk/client-sqs is one), as far as decoding reads it. Receive with
 * MessageAttributeNames ["All"] and MessageSystemAttributeNames
 * ["MessageGroupId"].
 */
export interface SQSMessageLike {
  readonly MessageId?: string | undefined;
  readonly ReceiptHandle?: string | undefined;
  readonly Body?: string | undefined;
  readonly Attributes?: { readonly MessageGroupId?: string | undefined } | undefined;
  readonly MessageAttributes?: Readonly<Record<string, { readonly StringValue?: string | undefined } | undefined>> | undefined;
}

/** An SQS message as both shapes give it. */
interface Received {
  id: string;
  receipt: string;
  body: string;
  /** The queue ARN Lambda names, "" if none. */
  source: string;
  /** The queue's ARN or URL when known: it, not the message, says whether the queue keeps an order. */
  queue: string;
  /** The String and Number message attributes (a Map: an attribute may be named __proto__). */
  attrs: Map<string, string>;
  /** The MessageGroupId system attribute. */
  group: string;
}

/** A queue known to keep no order: one whose name is not .fifo (SQS names a FIFO queue's ARN and URL so). */
function unordered(r: Received): boolean {
  return r.queue !== "" && !r.queue.endsWith(".fifo");
}

function str(v: unknown): string {
  return typeof v === "string" ? v : "";
}

/**
 * Decodes a record of the SQS event Lambda gives a function subscribed to
 * a queue. Whether it keeps an order is its queue's to say
 * (eventSourceARN, named .fifo or not). Throws a DecodeError.
 */
export function fromLambda(record: LambdaSQSRecord): Message {
  const attrs = new Map<string, string>();
  for (const [k, v] of Object.entries(record.messageAttributes ?? {})) {
    // A Binary attribute has no string value: Outflow's are never binary.
    if (typeof v?.stringValue === "string") attrs.set(k, v.stringValue);
  }
  const source = str(record.eventSourceARN);
  return decode({
    id: str(record.messageId),
    receipt: str(record.receiptHandle),
    body: str(record.body),
    source,
    queue: source,
    attrs,
    group: str(record.attributes?.MessageGroupId),
  });
}

/**
 * Decodes a message ReceiveMessage returned from the queue at queueUrl: on
 * a queue that is not FIFO (a standard queue subscribed to a FIFO topic, a
 * fair queue) the message has no group and no place, whatever group it
 * carries. Throws a DecodeError.
 */
export function fromQueue(queueUrl: string, message: SQSMessageLike): Message {
  const attrs = new Map<string, string>();
  for (const [k, v] of Object.entries(message.MessageAttributes ?? {})) {
    if (typeof v?.StringValue === "string") attrs.set(k, v.StringValue);
  }
  return decode({
    id: str(message.MessageId),
    receipt: str(message.ReceiptHandle),
    body: str(message.Body),
    source: "",
    queue: queueUrl,
    attrs,
    group: str(message.Attributes?.MessageGroupId),
  });
}

/**
 * Decodes a message ReceiveMessage returned from a queue it does not know:
 * a MessageGroupId is taken to mean a FIFO queue. A fair queue's messages
 * carry groups too and keep no order, so prefer fromQueue.
 */
export function fromSqs(message: SQSMessageLike): Message {
  return fromQueue("", message);
}

/** The body does not read into Go's struct: a member of the wrong type. */
class Unreadable extends Error {}

/** The members of a value read into a struct: none for null (Go leaves the struct as it is), else it must be an object. */
function members<F extends string>(v: Node, fields: Readonly<Record<F, string>>): [F, Node][] {
  if (v.kind === "null") return [];
  if (v.kind !== "object") throw new Unreadable(`${v.kind} is not an object`);
  return structMembers(v, fields);
}

/** A string field: null leaves it as it was. */
function asString(v: Node, was: string): string {
  if (v.kind === "null") return was;
  if (v.kind !== "string") throw new Unreadable(`${v.kind} is not a string`);
  return v.value;
}

/** A bool field: null leaves it as it was. */
function asBool(v: Node, was: boolean): boolean {
  if (v.kind === "null") return was;
  if (v.kind !== "true" && v.kind !== "false") throw new Unreadable(`${v.kind} is not a bool`);
  return v.kind === "true";
}

/** A *string field: null makes it nil. */
function asOptString(v: Node): string | undefined {
  if (v.kind === "null") return undefined;
  if (v.kind !== "string") throw new Unreadable(`${v.kind} is not a string`);
  return v.value;
}

/**
 * An int field (64-bit): a number written as a whole number in range; null
 * leaves it as it was. Past 2^53 the number rounds: harmless for an
 * attempt, which nothing counts on.
 */
function asInt(v: Node, was: number): number {
  if (v.kind === "null") return was;
  if (v.kind !== "number") throw new Unreadable(`${v.kind} is not a number`);
  if (!/^-?[0-9]+$/.test(v.text)) throw new Unreadable(`number ${v.text} is not a whole number`);
  const n = BigInt(v.text);
  if (n < INT64_MIN || n > INT64_MAX) throw new Unreadable(`number ${v.text} is out of range`);
  return Number(n);
}

/**
 * A map field: null makes it nil; an object's members are added to the
 * map it holds (Go reuses a map that is there), each value read by elem
 * from its zero value.
 */
function asMap<T>(v: Node, was: Map<string, T> | null, elem: (v: Node) => T): Map<string, T> | null {
  if (v.kind === "null") return null;
  if (v.kind !== "object") throw new Unreadable(`${v.kind} is not an object`);
  const out = was ?? new Map<string, T>();
  for (const m of v.members) out.set(m.name, elem(m.value));
  return out;
}

const ENVELOPE_FIELDS = {
  // SNS's.
  type: "Type",
  topic: "TopicArn",
  message: "Message",
  attrs: "MessageAttributes",
  // EventBridge's.
  detailType: "detail-type",
  source: "source",
  detail: "detail",
} as const;

/** The members of an SNS envelope and of an EventBridge event that tell them apart and that decoding reads (Go's envelope struct). */
interface EnvelopeFields {
  type: string;
  topic: string;
  message: string | undefined;
  attrs: Map<string, { type: string; value: string }> | null;
  detailType: string | undefined;
  source: string;
  detail: Node | undefined;
}

function snsAttribute(v: Node): { type: string; value: string } {
  const a = { type: "", value: "" };
  for (const [f, x] of members(v, { type: "Type", value: "Value" })) a[f] = asString(x, a[f]);
  return a;
}

function readEnvelope(body: string): EnvelopeFields {
  const env: EnvelopeFields = { type: "", topic: "", message: undefined, attrs: null, detailType: undefined, source: "", detail: undefined };
  for (const [f, v] of members(parse(body), ENVELOPE_FIELDS)) {
    switch (f) {
      case "type":
      case "topic":
      case "source":
        env[f] = asString(v, env[f]);
        break;
      case "message":
      case "detailType":
        env[f] = asOptString(v);
        break;
      case "attrs":
        env.attrs = asMap(v, env.attrs, snsAttribute);
        break;
      case "detail":
        // A json.RawMessage: any value, null too, as written.
        env.detail = v;
        break;
    }
  }
  return env;
}

/** A queue route's message (Outflow's attributes on the message), else an SNS envelope, else an EventBridge event. */
function decode(r: Received): Message {
  if (r.attrs.has(ATTR_KEY)) return fromAttributes(r, Envelope.SQS, "");
  let env: EnvelopeFields;
  try {
    env = readEnvelope(r.body);
  } catch {
    // Not JSON, or not JSON an envelope reads: whatever it is, Outflow did not send it.
    throw new DecodeError("not_outflow", r.id, null, NOT_ENVELOPE);
  }
  if (env.type === "Notification" && env.message !== undefined) {
    // The envelope's MessageGroupId is never the group: a FIFO queue gives
    // the group itself (the system attribute), and on a standard queue the
    // envelope's group promises an order the queue does not keep.
    const attrs = new Map<string, string>();
    for (const [k, a] of env.attrs ?? []) {
      if (a.type === "String" || a.type === "Number") attrs.set(k, a.value);
    }
    const inner: Received = { ...r, body: env.message, source: env.topic, attrs };
    if (!attrs.has(ATTR_KEY)) throw new DecodeError("not_outflow", r.id, Envelope.SNS, `the SNS message has no ${ATTR_KEY} attribute`);
    return fromAttributes(inner, Envelope.SNS, env.topic);
  }
  if (env.detailType !== undefined && env.detail !== undefined) return fromEvent(r, r.body, env.detail, env.detailType, env.source);
  throw new DecodeError("not_outflow", r.id, null, NOT_ENVELOPE);
}

/** A decimal whole number as Go's strconv.Atoi reads it (a sign, digits, 64 bits), else null. */
function whole(v: string | undefined): bigint | null {
  if (v === undefined || !/^[+-]?[0-9]+$/.test(v)) return null;
  const n = BigInt(v);
  return n >= INT64_MIN && n <= INT64_MAX ? n : null;
}

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** Go's base64.StdEncoding: padded, the standard alphabet, newlines ignored; else null (Buffer's decoder accepts anything). */
function base64(body: string): Uint8Array | null {
  const text = body.replace(/[\r\n]/g, "");
  if (!BASE64.test(text)) return null;
  return Uint8Array.from(Buffer.from(text, "base64"));
}

const utf8 = new TextEncoder();

/** A message whose body is the payload and whose attributes are Outflow's and the row's: a queue route's, or an SNS topic's. */
function fromAttributes(r: Received, env: Envelope, route: string): Message {
  const bad = (reason: string) => new DecodeError("malformed", r.id, env, reason);
  const key = r.attrs.get(ATTR_KEY) ?? "";
  if (key === "") throw bad(`${ATTR_KEY} is empty`);
  const attempt = whole(r.attrs.get(ATTR_ATTEMPT));
  if (attempt === null || attempt < 1n) throw bad(`${ATTR_ATTEMPT} must be a whole number from 1`);
  let group = r.group;
  let seq = 0;
  const s = r.attrs.get(ATTR_SEQ);
  if (s !== undefined) {
    const n = whole(s);
    if (n === null || n < 1n) throw bad(`${ATTR_SEQ} must be a whole number from 1`);
    // A place is counted exactly or not at all: past 2^53 a number would round, and an Inbox compare wrong places.
    if (n > BigInt(Number.MAX_SAFE_INTEGER)) throw bad(`${ATTR_SEQ} ${s} is larger than this package counts exactly`);
    seq = Number(n);
  }
  if (unordered(r)) {
    group = "";
    seq = 0;
  }
  const closed = r.attrs.get(ATTR_CLOSED) ?? "";
  if (r.attrs.has(ATTR_CLOSED) && closed === "") throw bad(`${ATTR_CLOSED} is empty`);
  let payload: Uint8Array;
  const enc = r.attrs.get(ATTR_ENCODING);
  if (enc === undefined) {
    payload = utf8.encode(r.body);
  } else if (enc === "base64") {
    const decoded = base64(r.body);
    if (decoded === null) throw bad(`the body is not the base64 ${ATTR_ENCODING} says`);
    payload = decoded;
  } else {
    throw bad(`unknown ${ATTR_ENCODING} ${JSON.stringify(enc)}`);
  }
  const attributes = new Map<string, string>();
  let traceParent = "";
  for (const [k, v] of r.attrs) {
    if (k === ATTR_TRACE_PARENT) traceParent = v;
    else if (!k.toLowerCase().startsWith("outflow.")) attributes.set(k, v);
  }
  return {
    key,
    route: route || r.source,
    group,
    seq,
    closed,
    attempt: Number(attempt), // rounds past 2^53: nothing counts on an attempt
    redriven: r.attrs.has(ATTR_REDRIVEN),
    payload,
    attributes: Object.fromEntries(attributes),
    traceParent,
    envelope: env,
    messageId: r.id,
    receiptHandle: r.receipt,
  };
}

/** An EventBridge event a rule sent to the queue: the detail holds Outflow's member beside the payload's own. */
function fromEvent(r: Received, body: string, detail: Node, detailType: string, source: string): Message {
  const fail = (kind: "not_outflow" | "malformed", reason: string) => new DecodeError(kind, r.id, Envelope.EventBridge, reason);
  if (detail.kind !== "object") throw fail("not_outflow", "the event's detail is not a JSON object");
  // The payload is the detail without Outflow's member, the others as the
  // event carries them: values as written, names as Go writes them again.
  let raw: Node | undefined;
  const parts: string[] = [];
  for (const m of detail.members) {
    if (m.name === MEMBER_OUTFLOW) {
      raw = m.value;
      continue;
    }
    parts.push(goString(m.name) + ":" + body.slice(m.value.start, m.value.end));
  }
  if (raw === undefined) throw fail("not_outflow", `the event's detail has no ${MEMBER_OUTFLOW} member`);
  let key = "";
  let attempt = 0;
  let redriven = false;
  let traceParent = "";
  let own: Map<string, string> | null = null;
  try {
    const fields = { key: "key", attempt: "attempt", redriven: "redriven", trace: "traceparent", attrs: "attributes" } as const;
    for (const [f, v] of members(raw, fields)) {
      if (f === "key") key = asString(v, key);
      else if (f === "attempt") attempt = asInt(v, attempt);
      else if (f === "redriven") redriven = asBool(v, redriven);
      else if (f === "trace") traceParent = asString(v, traceParent);
      else own = asMap(v, own, (x) => asString(x, ""));
    }
  } catch (e) {
    throw fail("malformed", `the detail's ${MEMBER_OUTFLOW} member: ${e instanceof Error ? e.message : String(e)}`);
  }
  if (key === "") throw fail("malformed", `the detail's ${MEMBER_OUTFLOW}.key is empty`);
  if (attempt < 1) throw fail("malformed", `the detail's ${MEMBER_OUTFLOW}.attempt must be a whole number from 1`);
  const attributes = new Map(own ?? []);
  attributes.set(ATTR_SOURCE, source);
  attributes.set(ATTR_DETAIL_TYPE, detailType);
  return {
    key,
    route: "",
    group: unordered(r) ? "" : r.group,
    seq: 0,
    closed: "",
    attempt,
    redriven,
    payload: utf8.encode("{" + parts.join(",") + "}"),
    attributes: Object.fromEntries(attributes),
    traceParent,
    envelope: Envelope.EventBridge,
    messageId: r.id,
    receiptHandle: r.receipt,
  };
}
