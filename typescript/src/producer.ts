/** The producer: validates rows and stages them, in your transaction or on their own, ordered groups as a chain. */

import { randomInt } from "node:crypto";
import {
  GetItemCommand,
  PutItemCommand,
  TransactWriteItemsCommand,
  type AttributeValue,
  type CancellationReason,
  type TransactWriteItem,
  type TransactWriteItemsCommandInput,
} from "@aws-sdk/client-dynamodb";
import {
  ConfigError,
  InvalidRowError,
  ItemError,
  OutflowError,
  PutError,
  SENT_BY_TRANSACT,
  StagingError,
  TransactError,
  type Kind,
} from "./errors.js";
import * as item from "./item.js";
import { loadPublished, routesFrom, routesGiven, type Config, type DynamoDBClientLike } from "./published.js";
import { blank, check, payloadBytes, type Row } from "./row.js";
import * as target from "./target.js";
import { currentTraceParent } from "./trace.js";

export type { TransactWriteItem } from "@aws-sdk/client-dynamodb";

/** How many items DynamoDB takes in one TransactWriteItems. */
export const MAX_TRANSACT_ITEMS = 100;

const PUBLISHED_ORDER_TTL_MS = 60_000;
const GROUP_TRIES = 20;
const THROTTLED: ReadonlySet<string> = new Set(["ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded"]);

/** A row validated, its key filled in. */
interface Prepared {
  key: string;
  queue: string;
  payload: Uint8Array;
  attributes: Record<string, string> | undefined;
  group: string;
  notBeforeMs: number;
}

function contentOfPrepared(row: Prepared): item.Content {
  const attrs = { ...row.attributes };
  delete attrs[target.ATTR_TRACE_PARENT];
  return { queue: row.queue, payload: row.payload, attributes: attrs, group: row.group, notBeforeMs: row.notBeforeMs };
}

interface Tail {
  key: string;
  seq: number;
}

function errorName(e: unknown): string {
  return typeof e === "object" && e !== null && typeof (e as { name?: unknown }).name === "string" ? (e as { name: string }).name : "";
}

function cancellationReasons(e: unknown): CancellationReason[] {
  const reasons = (e as { CancellationReasons?: unknown }).CancellationReasons;
  return Array.isArray(reasons) ? (reasons as CancellationReason[]) : [];
}

function messageOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/**
 * Which routes the producer stages as ordered: those Config lists, or with
 * none listed those the dispatcher publishes, read when first needed and
 * again once a minute.
 */
class OrderedRoutes {
  private readonly fixed: ReadonlySet<string> | null;
  private set: ReadonlySet<string> | null = null;
  private at = 0;
  private reading: Promise<ReadonlySet<string>> | null = null;

  constructor(
    routes: readonly string[] | null | undefined,
    private readonly read: () => Promise<ReadonlySet<string>>,
  ) {
    if (routes !== undefined && routes !== null) {
      for (const q of routes) {
        if (!target.fifoRoute(q)) {
          throw new ConfigError("invalid_config", `ordered route ${JSON.stringify(q)}: only FIFO routes (names ending in .fifo) keep an order per group`);
        }
      }
      this.fixed = new Set(routes);
    } else {
      this.fixed = null;
    }
  }

  /** Whether queue is ordered; an error (order_unknown) when that cannot be known. */
  async ordered(queue: string): Promise<[boolean, OutflowError | null]> {
    if (this.fixed !== null) return [this.fixed.has(queue), null];
    if (!target.fifoRoute(queue)) return [false, null];
    try {
      return [(await this.current()).has(queue), null];
    } catch (e) {
      return [false, new OutflowError("order_unknown", `route ${queue}: whether the route is ordered is unknown: ${messageOf(e)}`, { cause: e })];
    }
  }

  known(queue: string): boolean {
    if (this.fixed !== null) return this.fixed.has(queue);
    return this.set !== null && this.set.has(queue);
  }

  private async current(): Promise<ReadonlySet<string>> {
    if (this.set !== null && performance.now() - this.at < PUBLISHED_ORDER_TTL_MS) return this.set;
    // One read at a time: callers that arrive meanwhile share it.
    this.reading ??= (async () => {
      try {
        const found = await this.read();
        this.set = found;
        this.at = performance.now();
        return found;
      } catch (e) {
        if (e instanceof ConfigError && e.kind === "not_published") {
          throw new ConfigError(
            e.kind,
            `${e.message}: list the ordered routes in Config.ordered (an empty list for none), or run the dispatcher once to publish them`,
            { cause: e },
          );
        }
        throw e;
      } finally {
        this.reading = null;
      }
    })();
    return this.reading;
  }
}

/** Hooks for tests and tracing setups. */
export interface ProducerOptions {
  /** Now (default: the wall clock). */
  clock?: () => Date;
  /** A new stage id (default: 80 random bits, 16 base32 characters). */
  stageId?: () => string;
  /** The current W3C trace context, "" for none (default: OpenTelemetry's active span, or Lambda's X-Ray header). */
  traceParent?: () => string;
}

/** Stages rows into one outbox table. */
export class Producer {
  readonly table: string;
  private readonly client: DynamoDBClientLike;
  private readonly shards: number;
  private readonly maxBytes: number;
  private readonly lean: boolean;
  private readonly clock: () => Date;
  private readonly stageId: () => string;
  private readonly trace: () => string;
  private readonly orderedRoutes: OrderedRoutes;
  private readonly targets: Map<string, target.Target> | null = null;
  /** Where targets came from, for a row of a route not in them: "given", or the table the dispatcher published them in. */
  private readonly routesOrigin: string = "given";

  constructor(client: DynamoDBClientLike, config: Config, options: ProducerOptions = {}) {
    const shards = config.shards || 4;
    const problems: string[] = [];
    if (!config.table) problems.push("table must not be empty");
    if (!(Number.isInteger(shards) && shards >= 1 && shards <= 1000)) problems.push(`shards ${shards} must be in [1, 1000]`);
    if (problems.length > 0) throw new ConfigError("invalid_config", "invalid store config: " + problems.join("; "));
    const table = config.table as string;
    this.client = client;
    this.table = table;
    this.shards = shards;
    this.maxBytes = config.maxMessageBytes ?? 0;
    this.lean = config.lean === true;
    this.clock = options.clock ?? (() => new Date());
    this.stageId = options.stageId ?? item.newStageId;
    this.trace = options.traceParent ?? currentTraceParent;
    this.orderedRoutes = new OrderedRoutes(config.ordered, async () => new Set(Object.keys((await loadPublished(client, table)).ordered)));
    if (routesGiven(config.routes)) {
      try {
        this.targets = target.parseRoutes(config.routes);
      } catch (e) {
        throw new ConfigError("invalid_config", `routes: ${messageOf(e)}`);
      }
      this.routesOrigin = routesFrom(config);
      for (const q of config.ordered ?? []) {
        if (!this.targets.has(q)) {
          throw new ConfigError(
            "invalid_config",
            `ordered route ${JSON.stringify(q)} is not in the routes given (${[...this.targets.keys()].sort().join(",")})`,
          );
        }
      }
    }
  }

  /**
   * A producer configured by the dispatcher's published configuration in
   * table (see Published.apply). A row of a route the dispatcher does not
   * publish is refused naming the table and its routes; a table that does
   * not exist throws the SDK's error, naming the table (loadPublished).
   */
  static async fromPublished(client: DynamoDBClientLike, table: string, config: Config = {}, options: ProducerOptions = {}): Promise<Producer> {
    const published = await loadPublished(client, table);
    return new Producer(client, published.apply({ ...config, table: config.table || table }), options);
  }

  // -- validation ----------------------------------------------------------

  /** Validates row and fills in its key (and with trace an empty trace context); returns it and whether its route is ordered. */
  private async prepare(row: Row, trace: boolean): Promise<[Prepared, boolean]> {
    const [prepared, ordered, error] = await this.tryPrepare(row, trace);
    if (error !== null) throw error;
    return [prepared as Prepared, ordered];
  }

  /** prepare, with a refusal returned: ordered then still says where the row belonged (put holds its group's later rows back). */
  private async tryPrepare(row: Row, trace: boolean): Promise<[Prepared | null, boolean, OutflowError | null]> {
    let t = target.sqsTarget(target.fifoRoute(row.queue));
    if (this.targets !== null) {
      const routed = this.targets.get(row.queue);
      if (routed === undefined && !blank(row.queue)) {
        const routes = [...this.targets.keys()].sort().join(", ");
        return [
          null,
          false,
          new InvalidRowError("no_route", `no such route: route ${JSON.stringify(row.queue)} is not one of the routes ${this.routesOrigin} (${routes})`),
        ];
      }
      t = routed ?? target.sqsTarget();
    }
    let [ordered, unknown] = await this.orderedRoutes.ordered(row.queue);
    if (unknown !== null) ordered = true; // checked as strictly as an ordered row
    if (trace && !row.traceParent && !(row.attributes !== undefined && Object.hasOwn(row.attributes, target.ATTR_TRACE_PARENT))) {
      const tp = this.trace();
      if (tp) {
        const traced = { ...row, traceParent: tp };
        try {
          check(traced, t, this.maxBytes, ordered);
          row = traced;
        } catch (e) {
          if (!(e instanceof InvalidRowError)) throw e; // the context's trace goes only where it fits
        }
      }
    }
    let attrs: Record<string, string> | undefined;
    try {
      attrs = check(row, t, this.maxBytes, ordered);
    } catch (e) {
      if (e instanceof InvalidRowError) return [null, ordered, e];
      throw e;
    }
    if (unknown !== null) return [null, ordered, unknown];
    const key = row.key || item.newUlid(this.clock().getTime());
    const notBeforeMs = row.notBefore !== undefined ? row.notBefore.getTime() : 0;
    return [{ key, queue: row.queue, payload: payloadBytes(row), attributes: attrs, group: row.group ?? "", notBeforeMs }, ordered, null];
  }

  // -- items ---------------------------------------------------------------

  /** The item that stages row, pending, due at its notBefore or now; with lean, an unordered row due at once (seq 0, no notBefore) has no shard. */
  private stageItem(row: Prepared, now: Date, seq = 0, prev = ""): item.Item {
    if (item.reservedKey(row.key)) throw new InvalidRowError("invalid_key", `row key ${JSON.stringify(row.key)} is reserved`);
    const nowMs = now.getTime();
    const it: item.Item = { [item.PK]: { S: row.key }, [item.QUEUE]: { S: row.queue } };
    if (row.attributes !== undefined) {
      const m: Record<string, AttributeValue> = {};
      for (const [k, v] of Object.entries(row.attributes)) item.setOwn(m, k, { S: v });
      it[item.ATTRIBUTES] = { M: m };
    }
    if (row.group) it[item.GROUP] = { S: row.group };
    if (row.notBeforeMs) it[item.NOT_BEFORE] = { N: String(row.notBeforeMs) };
    if (seq) it[item.SEQ] = { N: String(seq) };
    if (prev) it[item.PREV] = { S: prev };
    it[item.STATUS] = { S: item.STATUS_PENDING };
    it[item.ATTEMPT] = { N: "0" };
    it[item.CREATED_AT] = { N: String(nowMs) };
    const due = row.notBeforeMs > nowMs ? row.notBeforeMs : nowMs;
    if (due) it[item.DUE_AT] = { N: String(due) };
    const shardKey = seq > 0 && row.group ? item.groupKey(row.queue, row.group) : row.key;
    if (!(this.lean && seq === 0 && !row.notBeforeMs)) {
      // A lean row (unordered, due at once) stays out of the due index: the
      // wake sends it from its stream record, the backstop finds it if that
      // fails. A delayed row waits for the sweep, an ordered one for its head.
      it[item.SHARD] = { S: item.shardOf(shardKey, this.shards) };
    }
    it[item.STAGE_ID] = { S: this.stageId() };
    it[item.ERRORS] = { L: [] };
    it[item.PAYLOAD] = item.payloadValue(row.payload);
    const size = item.baseSize(it);
    const room = item.growth(row.queue);
    if (size + room > item.ITEM_LIMIT) {
      throw new InvalidRowError(
        "item_too_large",
        `item too large: row ${row.key} is ${size} bytes without its delivery state; with the ${room} bytes that may add, ` +
          `it would pass the ${item.ITEM_LIMIT}-byte item limit`,
      );
    }
    return it;
  }

  private putOf(it: item.Item): TransactWriteItem {
    return {
      Put: {
        TableName: this.table,
        Item: it,
        ConditionExpression: "attribute_not_exists (#pk)",
        ExpressionAttributeNames: { "#pk": item.PK },
        ReturnValuesOnConditionCheckFailure: "ALL_OLD",
      },
    };
  }

  /** The update that moves an ordered group's tail from tail to (last, seq), on condition that no other row was staged since. */
  private groupUpdate(queue: string, group: string, tail: Tail, last: string, seq: number): TransactWriteItem {
    const names: Record<string, string> = { "#tail": item.TAIL, "#seq": item.SEQ };
    const values: Record<string, AttributeValue> = { ":tail": { S: last }, ":seq": { N: String(seq) } };
    let condition: string;
    if (tail.seq > 0) {
      condition = "#seq = :read";
      values[":read"] = { N: String(tail.seq) };
    } else {
      condition = "attribute_not_exists (#pk)";
      names["#pk"] = item.PK;
    }
    return {
      Update: {
        TableName: this.table,
        Key: { [item.PK]: { S: item.groupKey(queue, group) } },
        ConditionExpression: condition,
        UpdateExpression: "SET #tail = :tail, #seq = :seq",
        ExpressionAttributeNames: names,
        ExpressionAttributeValues: values,
        ReturnValuesOnConditionCheckFailure: "ALL_OLD",
      },
    };
  }

  /** An ordered group's tail, its last row's key and place, read with a strongly consistent read: ["", 0] before its first row. */
  async groupTail(queue: string, group: string): Promise<[string, number]> {
    const t = await this.tail(queue, group);
    return [t.key, t.seq];
  }

  private async tail(queue: string, group: string): Promise<Tail> {
    const key = item.groupKey(queue, group);
    const out = await this.client.send(new GetItemCommand({ TableName: this.table, Key: { [item.PK]: { S: key } }, ConsistentRead: true }));
    const it = out.Item;
    if (it === undefined || Object.keys(it).length === 0) return { key: "", seq: 0 };
    const tail = it[item.TAIL];
    const seq = it[item.SEQ];
    const n = seq?.N !== undefined && /^[+-]?[0-9]+$/.test(seq.N) ? Number(seq.N) : 0;
    if (tail?.S === undefined || n < 1) {
      throw new OutflowError("malformed", `malformed item: group item ${JSON.stringify(key)} needs a string tail and a positive whole seq`);
    }
    return { key: tail.S, seq: n };
  }

  /** The puts of rows, one ordered group's, after tail, then the group's update. */
  private chain(rows: readonly Prepared[], now: Date, tail: Tail): TransactWriteItem[] {
    const items: TransactWriteItem[] = [];
    let prev = tail.key;
    let seq = tail.seq;
    for (const row of rows) {
      seq += 1;
      items.push(this.putOf(this.stageItem(row, now, seq, prev)));
      prev = row.key;
    }
    const first = rows[0] as Prepared;
    items.push(this.groupUpdate(first.queue, first.group, tail, prev, seq));
    return items;
  }

  /**
   * Validates row and returns the conditional put that stages it, for your
   * own TransactWriteItems (the transaction fails if the key is staged
   * already: classify says how). An empty key is filled with a new ULID: read
   * it back from `item.Put.Item.pk.S`.
   *
   * A row of an ordered route needs transactItems.
   */
  async transactItem(row: Row): Promise<TransactWriteItem> {
    const [prepared, ordered] = await this.prepare(row, false);
    if (ordered) throw new InvalidRowError("ordered_route", `ordered route: route ${row.queue} is ordered: stage its rows with transactItems`);
    return this.putOf(this.stageItem(prepared, this.clock()));
  }

  /**
   * Validates rows and returns the writes that stage them, for your own
   * TransactWriteItems: items[i] is the put of rows[i], then one update per
   * ordered group, in the order the groups first appear.
   *
   * Rows of an ordered route are appended to their group as a chain in the
   * order given (one consistent read of each group's tail). If another
   * producer stages into the group before your transaction commits,
   * DynamoDB cancels it (classify: group_race or transaction_conflict): call
   * transactItems again and retry. ownItems counts your own writes against
   * the 100 a transaction takes.
   */
  async transactItems(rows: readonly Row[], options: { ownItems?: number } = {}): Promise<TransactWriteItem[]> {
    return (await this.stageRows(rows, options.ownItems ?? 0))[1];
  }

  private async stageRows(rows: readonly Row[], own: number): Promise<[string[], TransactWriteItem[]]> {
    const prepared: Prepared[] = [];
    const ordered: boolean[] = [];
    const seen = new Map<string, number>();
    const groups = new Map<string, { queue: string; group: string }>();
    const groupId = (queue: string, group: string) => JSON.stringify([queue, group]);
    for (const [i, r] of rows.entries()) {
      let p: Prepared;
      let o: boolean;
      try {
        [p, o] = await this.prepare(r, true);
      } catch (e) {
        if (e instanceof OutflowError) e.message = `row ${i}: ${e.message}`;
        throw e;
      }
      const before = seen.get(p.key);
      if (before !== undefined) {
        throw new InvalidRowError(
          "duplicate_key",
          `rows ${before} and ${i}: key given twice: both have key ${JSON.stringify(p.key)}, and a transaction writes an item once`,
        );
      }
      seen.set(p.key, i);
      prepared.push(p);
      ordered.push(o);
      if (o && !groups.has(groupId(p.queue, p.group))) groups.set(groupId(p.queue, p.group), { queue: p.queue, group: p.group });
    }
    const n = own + rows.length + groups.size;
    if (n > MAX_TRANSACT_ITEMS) {
      throw new InvalidRowError(
        "too_many_items",
        `too many items for one transaction: ${rows.length} rows in ${groups.size} ordered groups need ${n} items` +
          (own ? ` with the ${own} of yours` : "") +
          `, and DynamoDB takes at most ${MAX_TRANSACT_ITEMS} in one transaction`,
      );
    }
    const now = this.clock();
    const tails = new Map<string, Tail>();
    for (const [id, g] of groups) tails.set(id, await this.tail(g.queue, g.group));
    // Built in row order, each row's place from its group's tail.
    const items: TransactWriteItem[] = [];
    const places = new Map<string, Tail>(tails);
    for (const [i, p] of prepared.entries()) {
      if (!ordered[i]) {
        items.push(this.putOf(this.stageItem(p, now)));
        continue;
      }
      const id = groupId(p.queue, p.group);
      const place = places.get(id) as Tail;
      items.push(this.putOf(this.stageItem(p, now, place.seq + 1, place.key)));
      places.set(id, { key: p.key, seq: place.seq + 1 });
    }
    for (const [id, g] of groups) {
      const place = places.get(id) as Tail;
      items.push(this.groupUpdate(g.queue, g.group, tails.get(id) as Tail, place.key, place.seq));
    }
    return [prepared.map((p) => p.key), items];
  }

  // -- sending -------------------------------------------------------------

  /**
   * Stages rows together with your own writes (items) in one
   * TransactWriteItems: the rows' writes go after yours, the transaction is
   * sent once, and a cancellation throws TransactError (classify). Returns
   * the rows' keys. input goes to TransactWriteItems (ReturnConsumedCapacity,
   * say); a ClientRequestToken is refused, since each call stages its rows
   * anew (keyed rows make a resend safe: already_staged says it committed).
   */
  async transact(
    rows: readonly Row[],
    items: readonly TransactWriteItem[] = [],
    input: Omit<TransactWriteItemsCommandInput, "TransactItems"> = {},
  ): Promise<string[]> {
    if (input.ClientRequestToken !== undefined) {
      throw new Error(
        "transact: ClientRequestToken cannot make a resend idempotent here (each call stages its rows anew): " +
          "give rows keys, and take already_staged as committed",
      );
    }
    const [keys, mine] = await this.stageRows(rows, items.length);
    const sent = [...items, ...mine];
    try {
      await this.client.send(new TransactWriteItemsCommand({ ...input, TransactItems: sent }));
    } catch (e) {
      throw await this.explain(e, sent, true);
    }
    return keys;
  }

  /**
   * Explains error, what TransactWriteItems threw for items (as sent, in
   * order): a cancellation (TransactionCanceledException) becomes a
   * TransactError naming each failed item; any other error comes back as it
   * is.
   */
  async classify(error: unknown, items: readonly TransactWriteItem[]): Promise<TransactError | unknown> {
    return this.explain(error, items, false);
  }

  /** classify, for a transaction transact sent (byTransact) or the caller did: a lost group race's hint says which call builds the items again. */
  private async explain(error: unknown, items: readonly TransactWriteItem[], byTransact: boolean): Promise<TransactError | unknown> {
    if (errorName(error) !== "TransactionCanceledException") return error;
    const out: ItemError[] = [];
    for (const [i, reason] of cancellationReasons(error).entries()) {
      const code = reason.Code ?? "";
      if (code === "" || code === "None") continue;
      const ie = new ItemError(i, code, reason.Message ?? "");
      const sent = items[i];
      if (sent !== undefined) this.describe(ie, sent);
      if (code === "TransactionConflict") ie.reason = "transaction_conflict";
      else if (THROTTLED.has(code)) ie.reason = "throttled";
      else if (code !== "ConditionalCheckFailed") {
        // a code Outflow does not explain
      } else if (ie.row && sent?.Put?.Item !== undefined) await this.stagedReason(ie, sent.Put.Item, reason.Item);
      else if (ie.group) ie.reason = "group_race";
      else ie.reason = "condition_failed";
      if (byTransact) SENT_BY_TRANSACT.add(ie);
      out.push(ie);
    }
    return new TransactError(out, error);
  }

  private describe(ie: ItemError, sent: TransactWriteItem): void {
    if (sent.Put !== undefined) {
      ie.table = sent.Put.TableName ?? "";
      if (ie.table === this.table) ie.row = item.stagedRowKey(sent.Put.Item ?? {});
      return;
    }
    const body = sent.Update ?? sent.Delete ?? sent.ConditionCheck;
    if (body === undefined) return;
    ie.table = body.TableName ?? "";
    ie.key = body.Key;
    if (sent.Update !== undefined && ie.table === this.table && ie.key !== undefined) {
      const [queue, group] = groupOf(ie.key);
      if (queue && this.orderedRoutes.known(queue)) {
        ie.queue = queue;
        ie.group = group;
      }
    }
  }

  private async stagedReason(ie: ItemError, sent: item.Item, current: item.Item | undefined): Promise<void> {
    const mine = item.contentOf(sent);
    if (mine === null) {
      ie.reason = "key_conflict";
      return;
    }
    if (current === undefined || Object.keys(current).length === 0) {
      try {
        const out = await this.client.send(
          new GetItemCommand({ TableName: this.table, Key: { [item.PK]: { S: ie.row } }, ConsistentRead: true }),
        );
        current = out.Item;
      } catch (e) {
        ie.error = e;
        return;
      }
      if (current === undefined || Object.keys(current).length === 0) {
        ie.reason = "key_gone";
        return;
      }
    }
    const theirs = item.contentOf(current);
    ie.reason = theirs !== null && item.sameContent(theirs, mine) ? "already_staged" : "key_conflict";
  }

  /**
   * Stages rows on their own (not in a transaction) and returns their keys.
   * Idempotent: a key staged already with the same content is success. Rows
   * of an ordered route are staged one after another per group, in the order
   * given, retrying a lost race; a row after one that failed in its group is
   * not staged (not_staged). Any failure throws PutError, whose errors say
   * which rows failed and why.
   */
  async put(...rows: Row[]): Promise<string[]> {
    const keys: string[] = rows.map(() => "");
    const errors: (OutflowError | null)[] = rows.map(() => null);
    const prepared: (Prepared | null)[] = rows.map(() => null);
    const groups = new Map<string, { group: string; rows: number[] }>();
    for (const [i, r] of rows.entries()) {
      const [p, ordered, error] = await this.tryPrepare(r, true);
      errors[i] = error;
      if (p !== null) {
        keys[i] = p.key;
        prepared[i] = p;
      }
      if (ordered) {
        const id = JSON.stringify([r.queue, r.group ?? ""]);
        const g = groups.get(id) ?? { group: r.group ?? "", rows: [] };
        g.rows.push(i);
        groups.set(id, g);
        continue;
      }
      if (p !== null) errors[i] = await this.stageUnordered(p);
    }
    for (const { group, rows: idx } of groups.values()) {
      let failed = false;
      for (const i of idx) {
        if (failed) {
          errors[i] = new StagingError("not_staged", `not staged: an earlier row of group ${JSON.stringify(group)} failed`, keys[i]);
          continue;
        }
        const p = prepared[i];
        if (errors[i] === null && p !== null && p !== undefined) errors[i] = await this.stageOrdered(p);
        failed = errors[i] !== null;
      }
    }
    if (errors.some((e) => e !== null)) throw new PutError(keys, errors);
    return keys;
  }

  private keyConflict(row: Prepared): StagingError {
    return new StagingError("key_conflict", `key already staged with different content: ${row.key}`, row.key);
  }

  private async stageUnordered(row: Prepared): Promise<OutflowError | null> {
    let put: NonNullable<TransactWriteItem["Put"]>;
    try {
      put = this.putOf(this.stageItem(row, this.clock())).Put as NonNullable<TransactWriteItem["Put"]>;
    } catch (e) {
      if (e instanceof OutflowError) return e;
      throw e;
    }
    try {
      await this.client.send(new PutItemCommand({ ...put, Item: put.Item ?? {}, TableName: put.TableName ?? this.table }));
    } catch (e) {
      if (errorName(e) !== "ConditionalCheckFailedException") throw e;
      const current = (e as { Item?: item.Item }).Item;
      if (current !== undefined && Object.keys(current).length > 0) {
        const theirs = item.contentOf(current);
        if (theirs !== null && item.sameContent(theirs, contentOfPrepared(row))) return null;
      }
      return this.keyConflict(row);
    }
    return null;
  }

  private async stageOrdered(row: Prepared): Promise<OutflowError | null> {
    for (let attempt = 0; attempt < GROUP_TRIES; attempt++) {
      let items: TransactWriteItem[];
      try {
        const tail = await this.tail(row.queue, row.group);
        items = this.chain([row], this.clock(), tail);
      } catch (e) {
        if (e instanceof OutflowError) return e;
        throw e;
      }
      try {
        await this.client.send(new TransactWriteItemsCommand({ TransactItems: items }));
        return null;
      } catch (e) {
        if (errorName(e) !== "TransactionCanceledException") throw e;
        const first = cancellationReasons(e)[0];
        if (first?.Code === "ConditionalCheckFailed") {
          let current = first.Item;
          if (current === undefined || Object.keys(current).length === 0) {
            const out = await this.client.send(
              new GetItemCommand({ TableName: this.table, Key: { [item.PK]: { S: row.key } }, ConsistentRead: true }),
            );
            current = out.Item;
          }
          if (current !== undefined && Object.keys(current).length > 0) {
            const theirs = item.contentOf(current);
            if (theirs !== null && item.sameContent(theirs, contentOfPrepared(row))) return null;
          }
          return this.keyConflict(row);
        }
      }
      // The group moved (another producer staged first) or another
      // transaction held it: read the tail again after a short pause.
      if (attempt < GROUP_TRIES - 1) await sleep(1 + randomInt(10 << Math.min(attempt, 4)));
    }
    return new StagingError(
      "group_race",
      `stage ${row.key} in group ${JSON.stringify(row.group)} of ${row.queue}: other producers kept staging into the ordered group first`,
      row.key,
    );
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** An ordered group's item key read back: "group <queue> <group>". */
function groupOf(key: Record<string, AttributeValue>): [string, string] {
  const pk = key[item.PK]?.S;
  if (pk === undefined) return ["", ""];
  const first = pk.indexOf(" ");
  const second = first < 0 ? -1 : pk.indexOf(" ", first + 1);
  if (first < 0 || second < 0) return ["", ""];
  const [word, queue, group] = [pk.slice(0, first), pk.slice(first + 1, second), pk.slice(second + 1)];
  if (word !== "group" || item.groupKey(queue, group) !== pk) return ["", ""];
  return [queue, group];
}

export type { Kind };
