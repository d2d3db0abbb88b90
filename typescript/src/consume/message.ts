/**
 * The message a consumer receives, the policies of its Inbox, and the
 * errors of the consumer's half, as Go's package
 * github.com/outflowhq/outflow/consume and Python's outflowhq.consume have
 * them: each error's `kind` is the name conformance/consumer/*.json gives
 * it.
 */

/**
 * The way a message reached the consumer's queue. An SNS topic's message
 * with raw message delivery arrives exactly as a queue route's does, so it
 * reads as SQS.
 */
export const Envelope = {
  SQS: "sqs",
  SNS: "sns",
  EventBridge: "eventbridge",
} as const;
/** One of Envelope's values. */
export type Envelope = (typeof Envelope)[keyof typeof Envelope];

/**
 * The reason an Inbox records for a place it closed itself (Go's
 * ClosedRestaged): the place of a key this consumer applied at an earlier
 * place, which Outflow staged again. No message carries it.
 */
export const CLOSED_RESTAGED = "restaged";

/** One outbox row as its consumer receives it, whichever way it travelled (Go's consume.Message). */
export interface Message {
  /** The row's key: unique per row, the same on every copy. */
  readonly key: string;
  /**
   * Where the message came from, as far as it tells: the topic ARN of an
   * SNS envelope, else the queue ARN of a Lambda record; "" for an SDK
   * message or an EventBridge event.
   */
  readonly route: string;
  /** The FIFO message group, "" on a queue that keeps no order. */
  readonly group: string;
  /** The row's place in its ordered group, from 1; 0 for a row of an unordered route. */
  readonly seq: number;
  /**
   * Set on a message that is no row but closes the place of one that will
   * not come: "dead-letter", "purged". Give it to Inbox.close, never to
   * your apply.
   */
  readonly closed: string;
  /** The delivery attempt that sent this copy, from 1. */
  readonly attempt: number;
  /**
   * Set on every copy of a row an operator redrove (outflow.redriven): it
   * keeps its place but may come after its group went past it, so an Inbox
   * never lets it settle where a group joined part-way starts. A message
   * closing a redriven row's place carries it too. Outflow leaves the mark
   * off where it does not fit.
   */
  readonly redriven: boolean;
  /**
   * The row's payload as staged (decoded from base64 when Outflow encoded
   * it); for an EventBridge event, the detail without Outflow's member.
   */
  readonly payload: Uint8Array;
  /**
   * The row's own attributes, without Outflow's (outflow.*) and the
   * traceparent; for an EventBridge event with its source and detail-type.
   */
  readonly attributes: Readonly<Record<string, string>>;
  /** The W3C trace context the row was staged under, "" if none. */
  readonly traceParent: string;
  /** The way the message travelled; null for a message not decoded (made by hand). */
  readonly envelope: Envelope | null;
  /** SQS's id of the message as received: a redelivered copy has the same one. */
  readonly messageId: string;
  /** SQS's receipt handle of this receipt, to delete the message with. */
  readonly receiptHandle: string;
}

/**
 * A Message from the fields given, the others empty: for tests, and for a
 * consumer that runs an Inbox on messages it did not decode itself.
 */
export function newMessage(fields: Partial<Message> & { readonly key: string }): Message {
  return {
    route: "",
    group: "",
    seq: 0,
    closed: "",
    attempt: 0,
    redriven: false,
    payload: new Uint8Array(),
    attributes: {},
    traceParent: "",
    envelope: null,
    messageId: "",
    receiptHandle: "",
    ...fields,
  };
}

/** Whether the message has a place in an ordered group (Go's Message.Ordered). */
export function isOrdered(m: Pick<Message, "seq">): boolean {
  return m.seq > 0;
}

/** What an Inbox does at a gap in an ordered group (Go's GapPolicy). */
export const GapPolicy = {
  /**
   * Refuse the message (an OrderError, kind "gap") until the missing
   * places are applied or closed: the default. Outflow sends every place
   * as its row or as a message closing it, so the wait ends.
   */
  Wait: "wait",
  /**
   * Apply it and move the group's cursor past the gap, recording the
   * places passed on its inbox item. Sound on a FIFO queue only.
   */
  Pass: "pass",
} as const;
/** One of GapPolicy's values. */
export type GapPolicy = (typeof GapPolicy)[keyof typeof GapPolicy];

/** What an Inbox does with a message its group went past (Go's LatePolicy). */
export const LatePolicy = {
  /**
   * Apply nothing: record the message late and not applied, and throw a
   * LateError (acknowledge it). The default: the group's order is never
   * broken.
   */
  Record: "record",
  /** Apply the effect out of order, the inbox item marked late, the cursor left where it is. */
  Apply: "apply",
} as const;
/** One of LatePolicy's values. */
export type LatePolicy = (typeof LatePolicy)[keyof typeof LatePolicy];

/** Where an Inbox starts an ordered group it has no cursor for (Go's JoinPolicy). */
export const JoinPolicy = {
  /** At place 1: a later place that arrives first waits (the default). */
  FromStart: "from_start",
  /**
   * At the first place that arrives, the places before it passed: for a
   * consumer that starts on groups part-way through.
   */
  WhereSeen: "where_seen",
} as const;
/** One of JoinPolicy's values. */
export type JoinPolicy = (typeof JoinPolicy)[keyof typeof JoinPolicy];

/** The kind of a ConsumeError, as conformance/consumer/*.json names it. */
export type ConsumeKind =
  | "error" // anything else: a misuse, an unreadable item
  | "not_outflow" // Go ErrNotOutflow
  | "malformed" // Go ErrMalformed
  | "duplicate" // Go ErrDuplicate
  | "gap" // Go ErrGap
  | "passed" // Go ErrPassed
  | "late" // Go ErrLate
  | "no_group" // Go ErrNoGroup
  | "in_progress" // Go ErrInProgress
  | "hold_lost" // Go ErrHoldLost
  | "skipped" // Go ErrSkipped
  | "no_closed_hook"; // Go ErrNoClosedHook

/** Every outcome of the consumer's half that is not plain success; `kind` says which. */
export class ConsumeError extends Error {
  /** What happened, as the vectors name it. */
  readonly kind: ConsumeKind;

  constructor(message: string, kind: ConsumeKind = "error", options?: { cause?: unknown }) {
    super(message, options);
    this.kind = kind;
    this.name = "ConsumeError";
  }
}

/** A message that could not be decoded: `kind` is "not_outflow" or "malformed" (Go's ErrNotOutflow, ErrMalformed). */
export class DecodeError extends ConsumeError {
  /** SQS's id of the message. */
  readonly messageId: string;
  /** The envelope the message was read as, null when none was recognised. */
  readonly envelope: Envelope | null;
  /** What is wrong, without the payload. */
  readonly reason: string;

  constructor(kind: "not_outflow" | "malformed", messageId: string, envelope: Envelope | null, reason: string) {
    const env = envelope ? ` (${envelope})` : "";
    const what = kind === "not_outflow" ? "not a message Outflow sent" : "malformed Outflow message";
    super(`message ${messageId}${env}: ${what}: ${reason}`, kind);
    this.name = "DecodeError";
    this.messageId = messageId;
    this.envelope = envelope;
    this.reason = reason;
  }
}

/** Already applied (Go's ErrDuplicate): acknowledge the message and skip it. */
export class DuplicateError extends ConsumeError {
  constructor(message: string) {
    super(message, "duplicate");
    this.name = "DuplicateError";
  }
}

/**
 * A message of an ordered group refused: a gap (kind "gap", Go's ErrGap:
 * retry it later) or a group that went past it ("passed", Go's ErrPassed).
 */
export class OrderError extends ConsumeError {
  /** The message's key. */
  readonly key: string;
  /** Its group. */
  readonly group: string;
  /** The message's place. */
  readonly place: number;
  /** The last place the group applied (0: none). */
  readonly cursor: number;
  /**
   * A redriven row started the group (JoinPolicy.WhereSeen) and no message
   * sent in its turn has moved its cursor since: a gap is then passed as the
   * gap before a group's first place is (Go's Joining).
   */
  readonly joining: boolean;

  constructor(key: string, group: string, place: number, cursor: number, joining = false) {
    const gap = cursor < place;
    super(
      gap
        ? `message ${key}, place ${place} of group ${group}: an earlier place of its group is not applied: the group applied up to ${cursor}`
        : `message ${key}, place ${place} of group ${group}: its group has applied a later place (${cursor})`,
      gap ? "gap" : "passed",
    );
    this.name = "OrderError";
    this.key = key;
    this.group = group;
    this.place = place;
    this.cursor = cursor;
    this.joining = joining;
  }

  /** Whether places cursor+1 to place-1 are missing; otherwise the group went past the message's place. */
  get gap(): boolean {
    return this.cursor < this.place;
  }
}

/** Recorded late and not applied (Go's ErrLate): acknowledge it. `order` says where the group was, when known. */
export class LateError extends ConsumeError {
  /** The refusal that found the group past the message's place. */
  readonly order: OrderError | undefined;

  constructor(message: string, order?: OrderError) {
    super(message, "late");
    this.name = "LateError";
    this.order = order;
  }
}

/** An ordered message without its group (Go's ErrNoGroup): received with no MessageGroupId from a queue not named. */
export class NoGroupError extends ConsumeError {
  constructor(message: string) {
    super(message, "no_group");
    this.name = "NoGroupError";
  }
}

/** Another copy of the message is being applied (Go's ErrInProgress): retry later. */
export class InProgressError extends ConsumeError {
  constructor(message: string) {
    super(message, "in_progress");
    this.name = "InProgressError";
  }
}

/** The effect ran past its hold (Go's ErrHoldLost): another copy may have run it too. */
export class HoldLostError extends ConsumeError {
  constructor(message: string) {
    super(message, "hold_lost");
    this.name = "HoldLostError";
  }
}

/**
 * Not applied (Go's ErrSkipped): an earlier message of its FIFO group
 * failed in the same batch, or the invocation ran out of time.
 */
export class SkippedError extends ConsumeError {
  constructor(message: string) {
    super(message, "skipped");
    this.name = "SkippedError";
  }
}

/**
 * A message that closes a place reached a Handler with no `closed` hook
 * (Go's ErrNoClosedHook). It is reported failed, logged at ERROR and
 * counted (the ClosingMessagesWithoutHook metric), never acknowledged
 * unread: before 1.0.0 it was, and a consumer wired to the first recipe
 * (an Inbox used inside apply, no closed hook) left its group behind the
 * place for ever, in silence. Set `closed` to the Inbox's close, or to
 * `ackClosed` if the consumer keeps no order.
 */
export class NoClosedHookError extends ConsumeError {
  constructor(message: string) {
    super(message, "no_closed_hook");
    this.name = "NoClosedHookError";
  }
}
