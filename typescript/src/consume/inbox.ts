/**
 * The inbox: the items a consumer adds to its own DynamoDB transaction so
 * that a duplicate is refused and an ordered group is applied in order.
 * The table layout and item attributes are Go's (consume/inbox.go,
 * table.go) and Python's, so Go, Python and TypeScript consumers can share
 * a table, and a consumer name too: an item one writes, the others read
 * alike.
 */

import {
  GetItemCommand,
  TransactWriteItemsCommand,
  type AttributeValue,
  type GetItemCommandOutput,
  type TransactWriteItem,
  type TransactWriteItemsCommandOutput,
} from "@aws-sdk/client-dynamodb";
import { Handler, type HandlerOptions } from "./handler.js";
import {
  CLOSED_RESTAGED,
  ConsumeError,
  DuplicateError,
  GapPolicy,
  JoinPolicy,
  LateError,
  LatePolicy,
  NoGroupError,
  OrderError,
  isOrdered,
  type Message,
} from "./message.js";
import type { ApplyFunc } from "./outcome.js";
import { Poller, type PollerClient, type PollerOptions } from "./poller.js";
import { recordHandler, type RecordHandlerOptions } from "./powertools.js";

/**
 * A message's effect, as the items of the consumer's own DynamoDB
 * transaction: the Inbox commits them together with its record of the
 * message, so both happen or neither does (Go's consume.Effect). It may
 * return no items (an effect that is only the record) and must not write
 * them itself; throw to have the message retried.
 */
export type Effect = (m: Message) => readonly TransactWriteItem[] | Promise<readonly TransactWriteItem[]>;

/**
 * The table's partition key: a string, no sort key. An inbox item, a
 * group's cursor and an idempotency record each live under one, whose
 * value starts with what the item is ("inbox ", "cursor ",
 * "idempotency "), then the consumer's name and the message's key or
 * group, separated by spaces; so they can share a table with the
 * consumer's own items.
 */
export const ATTR_PK = "pk";
/** The TTL attribute, in Unix seconds: turn TTL on for it, so DynamoDB deletes expired inbox items and records. */
export const ATTR_EXPIRES_AT = "expires_at";

const CONSUMER = "consumer";
const KEY = "key";
const GROUP = "group";
const SEQ = "seq";
const AT = "at";
const SKIPPED = "skipped";
const GAP_FROM = "gap_from";
const GAP_TO = "gap_to";
const LATE_AFTER = "late_after";
const APPLIED = "applied";
const JOINED = "joined";
/** A group cursor a redriven row started: joined again at its next gap until a message sent in its turn moves it (Go's attrJoining). */
const JOINING = "joining";
const CLOSED = "closed";

/** A DynamoDB item. */
type Item = Record<string, AttributeValue>;

/**
 * The part of a DynamoDB client an Inbox calls: `new DynamoDBClient()` of
 * @aws-sdk/client-dynamodb is one, and so is a wrapper of your own.
 */
export interface InboxClient {
  send(command: TransactWriteItemsCommand): Promise<TransactWriteItemsCommandOutput>;
  send(command: GetItemCommand): Promise<GetItemCommandOutput>;
}

/** How an Inbox handles gaps, late messages and new groups, and for how long it keeps its items. */
export interface InboxOptions {
  /** What apply does at a gap in an ordered group (default: GapPolicy.Wait). */
  gaps?: GapPolicy;
  /** What apply does with a message its group went past (default: LatePolicy.Record). */
  late?: LatePolicy;
  /** Where apply starts an ordered group this consumer has no cursor for (default: JoinPolicy.FromStart). */
  join?: JoinPolicy;
  /**
   * How long an inbox item is kept, in milliseconds (0 or absent: for
   * ever). Keep it longer than a copy can arrive late: past the queue's
   * retention, and past any redrive of Outflow's dead letters.
   */
  ttl?: number;
  /** Now (default: the wall clock). */
  clock?: () => Date;
}

/** Whether name can be a consumer's name: it is part of item keys, whose parts are separated by spaces. */
export function validConsumer(name: string): boolean {
  return name !== "" && !/[ \t\r\n]/.test(name);
}

/** The key of the item whose partition key is pk. */
export function keyOf(pk: string): Item {
  return { [ATTR_PK]: { S: pk } };
}

/** The name the SDK gives an error, "" for none. */
export function errorName(e: unknown): string {
  return typeof e === "object" && e !== null && typeof (e as { name?: unknown }).name === "string" ? (e as { name: string }).name : "";
}

/** A whole number as Go's strconv.ParseInt reads it, else null. */
function wholeNumber(s: string | undefined): number | null {
  return s !== undefined && /^[+-]?[0-9]+$/.test(s) ? Number(s) : null;
}

/** A cursor item's place (0 for no item), and whether there is an item. */
function cursorSeq(item: Item | undefined): [number, boolean] {
  if (!present(item)) return [0, false];
  const seq = wholeNumber(item[SEQ]?.N);
  if (seq === null) throw new ConsumeError("inbox: a group cursor without a whole-number seq");
  return [seq, true];
}

function boolOf(item: Item, name: string): boolean | undefined {
  const v = item[name]?.BOOL;
  return typeof v === "boolean" ? v : undefined;
}

function stringOf(item: Item | undefined, name: string): string | undefined {
  const v = item?.[name]?.S;
  return typeof v === "string" ? v : undefined;
}

/** Whether there is an item: a GetItem that found none gives no Item, a refusal that carries none an empty one. */
function present(item: Item | undefined): item is Item {
  return item !== undefined && Object.keys(item).length > 0;
}

/** A cancellation reason as the SDK gives it. */
interface Reason {
  Code?: string | undefined;
  Item?: Item | undefined;
}

/** The cancellation reasons of a TransactionCanceledException, null for any other error. */
function canceled(error: unknown): Reason[] | null {
  if (errorName(error) !== "TransactionCanceledException") return null;
  const reasons = (error as { CancellationReasons?: unknown }).CancellationReasons;
  return Array.isArray(reasons) ? (reasons as Reason[]) : [];
}

/**
 * Records, in the consumer's own DynamoDB transaction, which messages a
 * consumer applied and how far each ordered group has come (Go's
 * consume.Inbox): a duplicate is refused, and an ordered group applied in
 * order.
 */
export class Inbox {
  /** The table of the inbox items and cursors (a string partition key "pk"). */
  readonly table: string;
  /** The consumer's name: each consumer of the same rows applies each once, under its own name. */
  readonly consumer: string;
  private readonly client: InboxClient | null;
  private readonly gaps: GapPolicy;
  private readonly late: LatePolicy;
  private readonly join: JoinPolicy;
  private readonly ttl: number;
  private readonly clock: () => Date;

  /**
   * An Inbox for the consumer in table. client may be null for a consumer
   * that only uses transactItems and runs its transactions itself.
   */
  constructor(client: InboxClient | null, table: string, consumer: string, options: InboxOptions = {}) {
    if (table === "") throw new TypeError("inbox: no table");
    if (!validConsumer(consumer)) throw new TypeError(`inbox: consumer name ${JSON.stringify(consumer)} must be non-empty, without spaces`);
    const ttl = options.ttl ?? 0;
    if (!(ttl >= 0)) throw new RangeError("inbox: TTL must not be negative");
    this.client = client;
    this.table = table;
    this.consumer = consumer;
    this.gaps = options.gaps ?? GapPolicy.Wait;
    this.late = options.late ?? LatePolicy.Record;
    this.join = options.join ?? JoinPolicy.FromStart;
    this.ttl = ttl;
    this.clock = options.clock ?? (() => new Date());
  }

  // -- keys ---------------------------------------------------------------

  /**
   * The partition key of a message's inbox item. A message closing a place
   * has an item of its own, apart from its row's (a key holds no space):
   * the row, redriven after its place was closed, is then late, not a
   * duplicate. A place closed for a restaged key has one per place: the key
   * may come again at another.
   */
  private inboxKey(m: Pick<Message, "key" | "group" | "seq" | "closed">): string {
    if (m.closed === CLOSED_RESTAGED) return `inbox ${this.consumer} ${m.key} restaged ${m.group} ${m.seq}`;
    if (m.closed !== "") return `inbox ${this.consumer} ${m.key} closed`;
    return `inbox ${this.consumer} ${m.key}`;
  }

  private cursorKey(m: Pick<Message, "group">): string {
    return `cursor ${this.consumer} ${m.group}`;
  }

  // -- the items ------------------------------------------------------------

  /**
   * The items to add to the TransactWriteItems that makes the message's
   * effect: the put of its inbox item, which fails if this consumer applied
   * the message already; then, for an ordered group, the update of its
   * cursor, which fails unless the message's place is the next. Give the
   * transaction's error to classify; apply does both. A message that closes
   * a place has no effect: give it to close.
   */
  transactItems(m: Message): TransactWriteItem[] {
    if (m.closed !== "") {
      throw new ConsumeError(`inbox: message ${m.key} closes place ${m.seq} of its group and has no effect: give it to close`);
    }
    return this.items(m, null, null, false);
  }

  /**
   * transactItems for a message classify refused for a gap, to apply it
   * anyway: its cursor update accepts the place after exactly the gap seen,
   * and its inbox item records the places passed. A refusal with cursor 0
   * (a group with no cursor) starts the group at the message's place.
   */
  transactItemsPast(m: Message, gap: OrderError): TransactWriteItem[] {
    if (!gap?.gap || gap.place !== m.seq || gap.key !== m.key) throw new ConsumeError("inbox: transactItemsPast needs the message's own gap");
    return this.items(m, gap, null, false);
  }

  /**
   * transactItems for a message its group went past, to apply it late: its
   * inbox item marked late, and no cursor update, so the group's order
   * stays as it is.
   */
  transactItemsLate(m: Message, passed: OrderError): TransactWriteItem[] {
    if (!passed || passed.gap || passed.place !== m.seq || passed.key !== m.key) {
      throw new ConsumeError("inbox: transactItemsLate needs the message's own refusal as passed");
    }
    return this.items(m, null, passed, false);
  }

  /**
   * transactItemsLate for a message to record and not apply (run it alone):
   * its inbox item is marked late and not applied. Should Outflow stage the
   * key again and it arrive in its group's turn, it is applied there.
   */
  transactItemsRecordLate(m: Message, passed: OrderError): TransactWriteItem[] {
    if (!passed || passed.gap || passed.place !== m.seq || passed.key !== m.key) {
      throw new ConsumeError("inbox: transactItemsRecordLate needs the message's own refusal as passed");
    }
    return this.items(m, null, passed, true);
  }

  /**
   * The inbox put and, for an ordered message, the cursor update: to the
   * next place, or past gap; for a late message (passed), the put alone,
   * marked not applied when record is set.
   */
  private items(m: Message, gap: OrderError | null, passed: OrderError | null, record: boolean): TransactWriteItem[] {
    if (m.key === "") throw new ConsumeError("inbox: a message without a key");
    if (isOrdered(m) && m.group === "") throw new NoGroupError(`message ${m.key}, place ${m.seq}: an ordered message without its group`);
    const nowMs = this.clock().getTime();
    const item: Item = {
      [ATTR_PK]: { S: this.inboxKey(m) },
      [CONSUMER]: { S: this.consumer },
      [KEY]: { S: m.key },
      [AT]: { N: String(nowMs) },
    };
    if (this.ttl > 0) item[ATTR_EXPIRES_AT] = { N: String(Math.floor((nowMs + this.ttl) / 1000)) };
    if (isOrdered(m)) {
      item[GROUP] = { S: m.group };
      item[SEQ] = { N: String(m.seq) };
    }
    if (gap !== null) {
      item[GAP_FROM] = { N: String(gap.cursor + 1) };
      item[GAP_TO] = { N: String(gap.place - 1) };
    }
    if (passed !== null) item[LATE_AFTER] = { N: String(passed.cursor) };
    if (m.closed !== "") item[CLOSED] = { S: m.closed };
    let cond = "attribute_not_exists(#pk)";
    const names: Record<string, string> = { "#pk": ATTR_PK };
    const values: Item = {};
    if (m.closed !== "") {
      // A closing message's item is its own: no late record shares it.
    } else if (record) {
      item[APPLIED] = { BOOL: false };
    } else {
      // A late record stands for no effect: a message applied replaces it.
      // Only it: the put still fails on any other item, the one that
      // replaced it included, so two copies apply it once.
      cond += " OR #applied = :false";
      names["#applied"] = APPLIED;
      values[":false"] = { BOOL: false };
    }
    const items: TransactWriteItem[] = [
      {
        Put: {
          TableName: this.table,
          Item: item,
          ConditionExpression: cond,
          ExpressionAttributeNames: names,
          // DynamoDB refuses an empty map of values.
          ...(Object.keys(values).length > 0 ? { ExpressionAttributeValues: values } : {}),
          // The item there tells a copy from the key at another place.
          ReturnValuesOnConditionCheckFailure: "ALL_OLD",
        },
      },
    ];
    if (!isOrdered(m) || passed !== null) return items;
    let after = m.seq - 1; // the place the cursor must be at
    const sets = ["#seq = :seq", "#key = :key", "#consumer = :consumer", "#group = :group", "#at = :at"];
    const unames: Record<string, string> = { "#seq": SEQ, "#key": KEY, "#consumer": CONSUMER, "#group": GROUP, "#at": AT };
    const uvalues: Item = {
      ":seq": { N: String(m.seq) },
      ":key": { S: m.key },
      ":consumer": { S: this.consumer },
      ":group": { S: m.group },
      ":at": { N: String(nowMs) },
    };
    let add = "";
    const joining = gap !== null && (gap.cursor === 0 || gap.joining);
    if (gap !== null) {
      after = gap.cursor;
      add = " ADD #skipped :skipped";
      unames["#skipped"] = SKIPPED;
      uvalues[":skipped"] = { N: String(gap.place - gap.cursor - 1) };
      if (joining) {
        // The group starts here: the place it joined at.
        sets.push("#joined = :seq");
        unames["#joined"] = JOINED;
      }
    }
    if (!m.redriven) {
      // A message sent in its turn: where the group started holds.
      add += " REMOVE #joining";
      unames["#joining"] = JOINING;
    } else if (this.join === JoinPolicy.WhereSeen && (after === 0 || joining)) {
      // A redriven row may be late: the group starts here on trial.
      sets.push("#joining = :true");
      unames["#joining"] = JOINING;
      uvalues[":true"] = { BOOL: true };
    }
    let ucond: string;
    if (after === 0) {
      ucond = "attribute_not_exists(#pk)";
      unames["#pk"] = ATTR_PK;
    } else {
      ucond = "#seq = :after";
      uvalues[":after"] = { N: String(after) };
    }
    items.push({
      Update: {
        TableName: this.table,
        Key: keyOf(this.cursorKey(m)),
        UpdateExpression: "SET " + sets.join(", ") + add,
        ConditionExpression: ucond,
        ExpressionAttributeNames: unames,
        ExpressionAttributeValues: uvalues,
        ReturnValuesOnConditionCheckFailure: "ALL_OLD",
      },
    });
    return items;
  }

  // -- outcomes -------------------------------------------------------------

  /**
   * The outcome of the transaction tx, which holds the message's
   * transactItems, given the error sending it threw (undefined: it
   * committed): undefined if it committed; a DuplicateError if the inbox
   * item refused it; an OrderError if the group's cursor did (read when the
   * refusal does not carry it); else error itself. Throw what it returns.
   *
   * An ordered message whose key this consumer applied at another place
   * (Outflow staged the key again) is applied once, at its first place: its
   * new place is closed (CLOSED_RESTAGED), so its group goes on, and the
   * outcome is a DuplicateError; that write needs the Inbox's client.
   */
  async classify(m: Message, tx: readonly TransactWriteItem[], error: unknown): Promise<unknown> {
    const reasons = canceled(error);
    if (reasons === null) return error ?? undefined;
    const refused = (pk: string): Reason | undefined => {
      for (const [i, it] of tx.entries()) {
        if (i >= reasons.length || reasons[i]?.Code !== "ConditionalCheckFailed") continue;
        let key: Item | undefined;
        if (it.Put !== undefined && it.Put.TableName === this.table) key = it.Put.Item;
        else if (it.Update !== undefined && it.Update.TableName === this.table) key = it.Update.Key;
        if (stringOf(key, ATTR_PK) === pk) return reasons[i];
      }
      return undefined;
    };
    const inboxReason = refused(this.inboxKey(m));
    if (inboxReason !== undefined) {
      if (isOrdered(m) && m.closed !== CLOSED_RESTAGED) return this.duplicate(m, inboxReason.Item);
      return new DuplicateError(`message ${m.key}: already applied`);
    }
    if (!isOrdered(m)) return error;
    const cursorReason = refused(this.cursorKey(m));
    if (cursorReason === undefined) return error;
    let cursor: number;
    let item = cursorReason.Item;
    try {
      let found: boolean;
      [cursor, found] = cursorSeq(item);
      if (!found && this.client !== null) {
        item = await this.get(this.cursorKey(m));
        [cursor] = cursorSeq(item);
      }
    } catch (e) {
      return new ConsumeError(`message ${m.key} refused by its group's cursor: ${e instanceof Error ? e.message : String(e)}`, "error", { cause: e });
    }
    // The cursor moved to this message's turn since the transaction was refused: a retry goes through.
    if (cursor === m.seq - 1) return error;
    return new OrderError(m.key, m.group, m.seq, cursor, item?.[JOINING]?.BOOL === true);
  }

  /**
   * The outcome for an ordered message whose inbox item was there (old, as
   * the refusal carries it; read when it does not): a copy of the same
   * place is a duplicate; the key at another place has that place closed,
   * unless the item there is a late record, which stands for no effect.
   */
  private async duplicate(m: Message, old: Item | undefined): Promise<unknown> {
    const dup = new DuplicateError(`message ${m.key}: already applied`);
    if (!present(old) && this.client !== null) {
      try {
        old = await this.get(this.inboxKey(m));
      } catch (e) {
        return new ConsumeError(`message ${m.key} refused by its inbox item, which could not be read: ${String(e)}`, "error", { cause: e });
      }
    }
    if (!present(old)) return dup; // gone since (past its TTL): a copy of what it recorded
    const group = stringOf(old, GROUP);
    let seq: number;
    try {
      [seq] = cursorSeq(old);
    } catch {
      seq = 0; // applied with no place
    }
    const samePlace = group !== undefined && group === m.group && seq === m.seq;
    if (boolOf(old, APPLIED) === false) {
      // Only a put that records a late message fails on a late record (one that applies replaces it): m is late too.
      if (samePlace) return new DuplicateError(`message ${m.key}, place ${m.seq} of group ${m.group}: a copy of a message recorded late and not applied`);
      return new LateError(`message ${m.key}, place ${m.seq} of group ${m.group}: recorded late, not applied (its key is recorded late at place ${seq} already)`);
    }
    if (samePlace) return dup;
    const applied = LATE_AFTER in old ? `applied late, at place ${seq}` : `applied at place ${seq}`;
    if (this.client === null) {
      return new ConsumeError(`message ${m.key}, place ${m.seq} of group ${m.group}: its key was ${applied}, and closing this place needs the Inbox's DynamoDB client`);
    }
    try {
      await this.apply({ ...m, closed: CLOSED_RESTAGED });
    } catch (e) {
      if (e instanceof LateError) {
        return new DuplicateError(`message ${m.key}, place ${m.seq} of group ${m.group}: its key was ${applied}, and its group went past this place: already applied`);
      }
      if (!(e instanceof DuplicateError)) return e;
    }
    return new DuplicateError(`message ${m.key}, place ${m.seq} of group ${m.group}: its key was ${applied}; this place is closed (${CLOSED_RESTAGED}): already applied`);
  }

  /**
   * Runs, in one transaction, the effect's items and the message's
   * transactItems. Resolves when the effect committed (or, under
   * LatePolicy.Apply, committed late); rejects with a DuplicateError (done
   * already: acknowledge), an OrderError (a gap: retry later) or a
   * LateError (recorded, not applied: acknowledge). With GapPolicy.Pass a
   * gap is passed, and with JoinPolicy.WhereSeen so is the gap before the
   * first message of a group with no cursor. A message that closes a place
   * has no effect: it is recorded as close records it.
   */
  async apply(m: Message, effect: readonly TransactWriteItem[] = []): Promise<void> {
    if (this.client === null) throw new ConsumeError("inbox: apply needs a DynamoDB client");
    if (m.closed !== "") effect = [];
    const items = this.items(m, null, null, false);
    let order: OrderError;
    try {
      await this.run(m, effect, items);
      return;
    } catch (e) {
      if (!(e instanceof OrderError)) throw e;
      order = e;
    }
    if (order.gap) {
      if (this.gaps === GapPolicy.Pass || (this.join === JoinPolicy.WhereSeen && (order.cursor === 0 || order.joining))) {
        // Passed, or a group with no cursor (or one a redriven row started) joined where it is seen.
        await this.run(m, effect, this.transactItemsPast(m, order));
        return;
      }
      throw order;
    }
    if (await this.appliedBefore(m)) {
      throw new DuplicateError(`message ${m.key}, place ${m.seq} of group ${m.group}: already applied (its inbox item is gone: past its TTL)`);
    }
    if (this.late === LatePolicy.Apply && m.closed === "") {
      await this.run(m, effect, this.transactItemsLate(m, order));
      return;
    }
    await this.run(m, [], this.transactItemsRecordLate(m, order));
    throw new LateError(`recorded late, not applied: its group went past it: ${order.message}`, order);
  }

  /**
   * Records a message that closes a place (m.closed): its inbox item,
   * marked with the reason, and its group's cursor moved past the place,
   * with no effect. Ordered like a row: an OrderError before its turn, a
   * DuplicateError for a copy, a LateError once the group went past. Give
   * it to Handler's closed hook.
   */
  async close(m: Message): Promise<void> {
    if (m.closed === "") throw new ConsumeError(`inbox: message ${m.key} closes no place: apply it`);
    await this.apply(m);
  }

  // -- consumers wired to the inbox -----------------------------------------

  /**
   * A Lambda Handler wired to this inbox (Go's Inbox.Handler): each
   * message's effect is committed with apply, and each message that closes
   * a place goes to close, so the wiring that decides correctness is not
   * yours to get wrong. options are the Handler's hooks (onResult,
   * onFailure, reserveMs, log, metrics).
   */
  handler(effect: Effect, options: Omit<HandlerOptions, "closed"> = {}): Handler {
    return new Handler(this.applyEffect(effect), { ...options, closed: (m) => this.close(m) });
  }

  /**
   * A Poller of the queue at queueUrl wired to this inbox as handler wires
   * a Handler (Go's Inbox.Poller): call its run(signal). options are the
   * Poller's own (concurrency, visibility, wait, onResult, onFailure, log,
   * metrics).
   */
  poller(sqs: PollerClient, queueUrl: string, effect: Effect, options: Omit<PollerOptions, "sqs" | "queueUrl" | "apply" | "closed"> = {}): Poller {
    return new Poller({ ...options, sqs, queueUrl, apply: this.applyEffect(effect), closed: (m) => this.close(m) });
  }

  /**
   * A record handler for Powertools' batch processor
   * (@aws-lambda-powertools/batch) wired to this inbox as handler wires a
   * Handler: give it to processPartialResponse with
   * SqsFifoPartialProcessorAsync.
   */
  recordHandler(effect: Effect, options: Omit<RecordHandlerOptions, "closed"> = {}): ReturnType<typeof recordHandler> {
    return recordHandler(this.applyEffect(effect), { ...options, closed: (m) => this.close(m) });
  }

  /** An apply that commits effect's items with the message's inbox items. */
  private applyEffect(effect: Effect): ApplyFunc {
    if (typeof effect !== "function") throw new TypeError("inbox: an effect function is required");
    return async (m) => {
      const items = await effect(m);
      if (!Array.isArray(items)) throw new ConsumeError(`inbox: the effect for message ${m.key} returned no array of transaction items`);
      await this.apply(m, items);
    };
  }

  /** The item under pk, read strongly consistent; undefined if none. */
  private async get(pk: string): Promise<Item | undefined> {
    const client = this.client as InboxClient;
    const out = await client.send(new GetItemCommand({ TableName: this.table, Key: keyOf(pk), ConsistentRead: true }));
    return out.Item;
  }

  /**
   * Whether a message its group went past was applied in its turn, its
   * inbox item gone since (expired), so a copy of it is a duplicate, not a
   * late message (Go's appliedBefore). A closing message's place was
   * applied if its row's inbox item records it there. A row's place, under
   * GapPolicy.Wait, moves only by the row itself or by its closing message:
   * with no closing record, the row was applied; with JoinPolicy.WhereSeen,
   * unless the place is below the one its group joined at. Under
   * GapPolicy.Pass a place may have been passed: the message is late.
   */
  private async appliedBefore(m: Message): Promise<boolean> {
    if (m.closed !== "") return appliedAt(await this.get(`inbox ${this.consumer} ${m.key}`), m);
    if (this.gaps !== GapPolicy.Wait) return false;
    const closing = await this.get(this.inboxKey({ key: m.key, group: "", seq: 0, closed: "any" }));
    if (present(closing) || this.join !== JoinPolicy.WhereSeen) return !present(closing);
    const joined = (await this.get(this.cursorKey(m)))?.[JOINED]?.N;
    if (joined === undefined) return true; // the group started at place 1
    const at = wholeNumber(joined);
    if (at === null) throw new ConsumeError(`message ${m.key}: its group's cursor has a joined that is no whole number`);
    return m.seq >= at;
  }

  /** Writes effect and items in one transaction and throws the outcome classify gives. */
  private async run(m: Message, effect: readonly TransactWriteItem[], items: readonly TransactWriteItem[]): Promise<void> {
    const tx = [...effect, ...items];
    const client = this.client as InboxClient;
    let error: unknown = undefined;
    try {
      await client.send(new TransactWriteItemsCommand({ TransactItems: tx }));
    } catch (e) {
      error = e;
    }
    const outcome = await this.classify(m, tx, error);
    if (outcome !== undefined) throw outcome;
  }
}

/**
 * Whether a row's inbox item records its effect at m's place: not a late
 * record, and not the key at another place (a restaged key). An item
 * without a place records an effect all the same.
 */
function appliedAt(item: Item | undefined, m: Message): boolean {
  if (!present(item)) return false;
  if (boolOf(item, APPLIED) === false) return false;
  if (!(SEQ in item)) return true;
  const group = stringOf(item, GROUP);
  let seq: number;
  try {
    [seq] = cursorSeq(item);
  } catch {
    return false;
  }
  return group !== undefined && group === m.group && seq === m.seq;
}
