/** Errors, each with a kind the Go package and the conformance vectors share. */

import type { AttributeValue } from "@aws-sdk/client-dynamodb";

/**
 * Why something failed, named as conformance/producer/*.json names it: each
 * kind stands for one of the Go package's sentinel errors (`errors.Is`
 * there, `error.kind` here).
 */
export type Kind =
  // A row refused before anything is sent (outflow.Err* of row.go).
  | "empty_queue" // ErrEmptyQueue
  | "invalid_key" // ErrInvalidKey
  | "empty_payload" // ErrEmptyPayload
  | "too_large" // ErrPayloadTooLarge: the message or event
  | "too_many_attributes" // ErrTooManyAttributes
  | "attribute_name" // ErrAttributeName
  | "attribute_value" // ErrAttributeValue
  | "group_required" // ErrGroupRequired
  | "invalid_id" // ErrInvalidGroup
  | "group_not_fifo" // ErrGroupNotFIFO: a group on a route that is not FIFO
  | "not_json" // ErrNotJSON
  | "event_field" // ErrEventField
  | "item_too_large" // ErrItemTooLarge: the DynamoDB item
  | "no_route" // ErrNoRoute
  | "ordered_route" // ErrOrderedRoute
  | "duplicate_key" // ErrDuplicateKey
  | "too_many_items" // ErrTooManyItems
  | "order_unknown" // ErrOrderUnknown
  // Staging outside a transaction (put).
  | "key_conflict" // ErrKeyConflict
  | "not_staged" // ErrNotStaged
  | "group_race" // ErrGroupRace
  // Why a transaction was canceled, per item (ItemError.reason).
  | "already_staged" // ErrAlreadyStaged
  | "key_gone" // ErrKeyGone
  | "condition_failed" // ErrConditionFailed
  | "transaction_conflict" // ErrTransactionConflict
  | "throttled" // ErrThrottled
  | "transaction_canceled" // *TransactError
  // The configuration.
  | "invalid_config" // NewProducer's refusals
  | "not_published" // ErrNotPublished
  | "malformed" // a published item this reader cannot read
  | "published_mismatch"; // ErrPublishedMismatch

/** Every kind, in the order the type lists them. */
export const KINDS: readonly Kind[] = [
  "empty_queue",
  "invalid_key",
  "empty_payload",
  "too_large",
  "too_many_attributes",
  "attribute_name",
  "attribute_value",
  "group_required",
  "invalid_id",
  "group_not_fifo",
  "not_json",
  "event_field",
  "item_too_large",
  "no_route",
  "ordered_route",
  "duplicate_key",
  "too_many_items",
  "order_unknown",
  "key_conflict",
  "not_staged",
  "group_race",
  "already_staged",
  "key_gone",
  "condition_failed",
  "transaction_conflict",
  "throttled",
  "transaction_canceled",
  "invalid_config",
  "not_published",
  "malformed",
  "published_mismatch",
];

/** Every error this package throws; `kind` says which. */
export class OutflowError extends Error {
  readonly kind: Kind;

  constructor(kind: Kind, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.kind = kind;
    this.name = "OutflowError";
  }
}

/**
 * A row refused before anything was sent: it would not reach its target as
 * written (the dispatcher's own checks), or cannot be staged as given.
 */
export class InvalidRowError extends OutflowError {
  constructor(kind: Kind, message: string) {
    super(kind, message);
    this.name = "InvalidRowError";
  }
}

/** A configuration the producer refuses, or a published one it cannot read or does not agree with. */
export class ConfigError extends OutflowError {
  constructor(kind: Kind, message: string, options?: { cause?: unknown }) {
    super(kind, message, options);
    this.name = "ConfigError";
  }
}

/**
 * A row `Producer.put` could not stage: its key is staged with other content
 * (key_conflict), other producers kept winning its ordered group
 * (group_race), or an earlier row of its group failed (not_staged).
 */
export class StagingError extends OutflowError {
  readonly key: string;

  constructor(kind: Kind, message: string, key = "") {
    super(kind, message);
    this.name = "StagingError";
    this.key = key;
  }
}

/**
 * Some rows given to `Producer.put` were not staged. `errors[i]` is why
 * `rows[i]` was not (null: it was staged), and `keys[i]` its key. `kind` is
 * the first failure's.
 */
export class PutError extends OutflowError {
  readonly keys: string[];
  readonly errors: (OutflowError | null)[];

  constructor(keys: readonly string[], errors: readonly (OutflowError | null)[]) {
    const failed = errors.flatMap((e, i) => (e === null ? [] : [[i, e] as const]));
    const first = failed[0];
    super(first === undefined ? "transaction_canceled" : first[1].kind, failed.map(([i, e]) => `row ${i}: ${e.message}`).join("; "));
    this.name = "PutError";
    this.keys = [...keys];
    this.errors = [...errors];
  }

  /** Whether any row failed for kind. */
  has(kind: Kind): boolean {
    return this.errors.some((e) => e !== null && e.kind === kind);
  }
}

/** Why one item of a canceled transaction failed. */
export class ItemError {
  /** The item's position in TransactItems. */
  index: number;
  /** DynamoDB's cancellation reason code. */
  code: string;
  message: string;
  table = "";
  /** The item's key, for an Update, a Delete or a ConditionCheck. */
  key: Record<string, AttributeValue> | undefined = undefined;
  /** The outbox row's key when the item stages a row. */
  row = "";
  queue = "";
  /** The ordered group when the item moves its tail. */
  group = "";
  /**
   * already_staged, key_conflict, key_gone, group_race, condition_failed,
   * transaction_conflict or throttled; null for a code Outflow does not
   * explain (a validation error, which `code` says), or a staged key whose
   * row could not be read to compare (`error` says why).
   */
  reason: Kind | null = null;
  error: unknown = undefined;

  constructor(index: number, code: string, message = "") {
    this.index = index;
    this.code = code;
    this.message = message;
  }

  toString(): string {
    let what: string;
    if (this.row) what = `outbox row ${this.row}`;
    else if (this.group) what = `tail of group ${JSON.stringify(this.group)} of ${this.queue}`;
    else if (this.key !== undefined) what = `table ${this.table} key ${formatKey(this.key)}`;
    else what = `put into table ${this.table}`;
    let why = this.code;
    if (this.reason === "group_race" && SENT_BY_TRANSACT.has(this)) {
      why = "another producer staged into the group first (call transact again: it builds the rows' items anew)";
    } else if (this.reason === "group_race") {
      why = "another producer staged into the group first (build the row's items again with transactItems)";
    } else if (this.reason !== null) {
      why = this.reason.replaceAll("_", " ");
    } else if (this.error !== undefined) {
      why = `key staged already, and reading it to compare its content failed: ${String(this.error)}`;
    } else if (this.message) {
      why += ": " + this.message;
    }
    return `item ${this.index} (${what}): ${why}`;
  }
}

/**
 * The items of a transaction Producer.transact sent: it builds the rows'
 * items itself, so a lost group race is retried by calling it again, not by
 * building items. Held aside, so ItemError's fields stay as documented.
 */
export const SENT_BY_TRANSACT = new WeakSet<ItemError>();

function formatKey(key: Record<string, AttributeValue>): string {
  return Object.keys(key)
    .sort()
    .map((name) => {
      const v = key[name];
      if (v?.S !== undefined) return `${name}=${JSON.stringify(v.S)}`;
      if (v?.N !== undefined) return `${name}=${v.N}`;
      return `${name}=(binary)`;
    })
    .join(",");
}

const RETRYABLE: ReadonlySet<Kind | null> = new Set<Kind | null>(["group_race", "transaction_conflict", "throttled"]);

/**
 * A TransactWriteItems cancellation, explained per item: nothing in the
 * transaction was written. `items` are the items DynamoDB gave a reason
 * for; `cause` is the SDK's error.
 */
export class TransactError extends OutflowError {
  readonly items: ItemError[];

  constructor(items: readonly ItemError[], cause: unknown) {
    const text = items.length > 0 ? items.map(String).join("; ") : cause instanceof Error ? cause.message : String(cause);
    super("transaction_canceled", "transaction canceled, nothing written: " + text, { cause });
    this.name = "TransactError";
    this.items = [...items];
  }

  /** Whether any item failed for kind (Go: errors.Is). */
  has(kind: Kind): boolean {
    return this.items.some((i) => i.reason === kind);
  }

  /**
   * Whether sending the transaction again, with the ordered rows' items
   * built anew by transactItems, may succeed: every item failed only because
   * another writer got there first or the table was over its capacity (back
   * off first).
   */
  get retryable(): boolean {
    return this.items.length > 0 && this.items.every((i) => RETRYABLE.has(i.reason));
  }
}
