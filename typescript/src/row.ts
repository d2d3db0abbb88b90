/** A row: one message to stage. */

import { InvalidRowError } from "./errors.js";
import { utf8 } from "./item.js";
import * as target from "./target.js";

/** How many attributes a row for an SQS queue or an SNS topic may carry: SQS allows 10, and Outflow sends outflow.key and outflow.attempt. */
export const MAX_OWN_ATTRIBUTES = target.MAX_ATTRIBUTES - 2;
/**
 * How many a row of an ordered route may carry: its message also carries its place in the group (outflow.seq), and
 * keeps room for outflow.redriven, the mark a copy sent after an operator's redrive carries so that a consumer joining
 * where it is seen does not start the group at a place sent out of turn (its size is checked with the mark).
 */
export const MAX_ORDERED_ATTRIBUTES = MAX_OWN_ATTRIBUTES - 2;

const MAX_SEQ = 2n ** 63n - 1n; // the widest place a row can take, for sizing
const PLACEHOLDER_KEY = "01ARZ3NDEKTSV4RRFFQ69G5FAV"; // a ULID stands in for one to generate
const MAX_ATTEMPTS_LIMIT = 1000;

/**
 * One message to stage.
 *
 * `key` is the idempotency key (empty or absent: a new ULID), 1-128
 * printable ASCII characters. `queue` is the route name; names ending in
 * ".fifo" need a `group`, and a group on any other route is refused
 * (group_not_fifo). `payload` is the body: text (a string, or bytes
 * that are UTF-8 SQS accepts) is sent as it is, other bytes base64-encoded.
 * On an EventBridge route it must be a JSON object. `attributes` become
 * String message attributes (at most 8, 7 with a binary payload, one less on
 * an ordered route); on EventBridge "source" and "detail-type" name the
 * event's. Absent and `{}` differ: `{}` is stored as an empty map.
 * `notBefore` delays delivery. `traceParent` is the W3C trace context,
 * stored as the "traceparent" attribute.
 */
export interface Row {
  queue: string;
  payload: string | Uint8Array;
  key?: string;
  attributes?: Readonly<Record<string, string>>;
  group?: string;
  notBefore?: Date;
  traceParent?: string;
}

export function payloadBytes(row: Row): Uint8Array {
  return typeof row.payload === "string" ? utf8(row.payload) : row.payload;
}

/**
 * Throws InvalidRowError for the first reason the row cannot be staged to an
 * SQS queue. maxMessageBytes 0 is the dispatcher's default, 256 KiB. A
 * Producer checks a row of an ordered route with one attribute less, and a
 * producer given routes against its route's own target.
 */
export function validateRow(row: Row, maxMessageBytes = 0): void {
  check(row, target.sqsTarget(target.fifoRoute(row.queue)), maxMessageBytes, false);
}

/** The attributes as stored: `attributes` with the trace context added, after checking it is one; undefined when the row has none. */
export function storedAttributes(row: Row): Record<string, string> | undefined {
  let tp = row.traceParent ?? "";
  const attrs = row.attributes;
  if (attrs !== undefined && Object.hasOwn(attrs, target.ATTR_TRACE_PARENT)) {
    const v = attrs[target.ATTR_TRACE_PARENT] ?? "";
    const problem = target.traceParentProblem(v);
    if (problem !== null) throw new InvalidRowError("attribute_value", `invalid message attribute value: ${problem}`);
    if (tp && tp !== v) {
      throw new InvalidRowError("attribute_value", "invalid message attribute value: the traceparent attribute and traceParent differ");
    }
    tp = v;
  }
  if (!tp) return attrs === undefined ? undefined : { ...attrs };
  const problem = target.traceParentProblem(tp);
  if (problem !== null) throw new InvalidRowError("attribute_value", `invalid message attribute value: ${problem}`);
  return { ...attrs, [target.ATTR_TRACE_PARENT]: tp };
}

/** Whether s is empty or only white space, as Go's strings.TrimSpace sees it. */
export function blank(s: string): boolean {
  return /^[\t\n\v\f\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*$/.test(s);
}

/**
 * Throws InvalidRowError for the first reason row cannot be staged for t, on
 * an ordered route if ordered; returns its stored attributes.
 */
export function check(row: Row, t: target.Target, maxBytes: number, ordered: boolean): Record<string, string> | undefined {
  if (blank(row.queue)) throw new InvalidRowError("empty_queue", "queue is empty");
  const key = row.key ?? "";
  if (key && !target.validId(key)) {
    throw new InvalidRowError("invalid_key", `invalid key: ${JSON.stringify(key)} must be 1-128 printable ASCII characters without spaces`);
  }
  const group = row.group ?? "";
  if (group && !target.fifoRoute(row.queue)) {
    // Whether a row takes a group is its route's name's to say, as outflow
    // enqueue decides: a group on any other route (a standard queue, a
    // standard topic, an event bus) would order nothing.
    throw new InvalidRowError(
      "group_not_fifo",
      `group ${JSON.stringify(group)}: route ${JSON.stringify(row.queue)} is not FIFO (its name does not end in .fifo), ` +
        "and only a FIFO queue or topic has message groups; drop the group",
    );
  }
  const attrs = storedAttributes(row);
  const [most, seq] = ordered ? [MAX_ORDERED_ATTRIBUTES, MAX_SEQ] : [MAX_OWN_ATTRIBUTES, 0n];
  const count = Object.keys(attrs ?? {}).length;
  if (count > most && t.kind !== "EventBridge") {
    throw new InvalidRowError("too_many_attributes", `too many message attributes: ${count} given, at most ${most}`);
  }
  // Sized with the widest attempt number and place there can be: a message
  // that fits only at attempt 1 would be refused at attempt 10.
  target.validateFor(key || PLACEHOLDER_KEY, payloadBytes(row), attrs ?? {}, row.group ?? "", MAX_ATTEMPTS_LIMIT, seq, t, maxBytes);
  return attrs;
}
