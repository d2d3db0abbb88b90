/** The dispatcher's published configuration (docs/published-config.md) and the producer's Config. */

import {
  GetItemCommand,
  type GetItemCommandOutput,
  type PutItemCommand,
  type PutItemCommandOutput,
  type TransactWriteItemsCommand,
  type TransactWriteItemsCommandOutput,
} from "@aws-sdk/client-dynamodb";
import { ConfigError } from "./errors.js";
import { CONFIG_KEY, PK } from "./item.js";
import { parseRoutes } from "./target.js";

const CONFIG_FORMAT = 1;

/**
 * The part of a DynamoDB client the producer calls: `new DynamoDBClient()`
 * of @aws-sdk/client-dynamodb is one, and so is a wrapper of your own.
 */
export interface DynamoDBClientLike {
  send(command: GetItemCommand): Promise<GetItemCommandOutput>;
  send(command: PutItemCommand): Promise<PutItemCommandOutput>;
  send(command: TransactWriteItemsCommand): Promise<TransactWriteItemsCommandOutput>;
}

/**
 * Where and how rows are staged.
 *
 * `shards` must equal the dispatcher's OUTFLOW_SHARDS (0 or absent: 4) and
 * `maxMessageBytes` its OUTFLOW_MAX_MESSAGE_BYTES (0 or absent: 262144).
 * `ordered` lists the ordered routes; absent (or null) reads them from the
 * published configuration when a row of a FIFO route is first staged (and
 * once a minute after), an empty list says none. `routes` is the
 * dispatcher's OUTFLOW_ROUTES (its string, or a record of route name to
 * target): given, each row is checked against its route's target and a
 * route not in it is refused; without, every row is checked against SQS's
 * rules.
 */
export interface Config {
  table?: string;
  shards?: number;
  maxMessageBytes?: number;
  ordered?: readonly string[] | null;
  routes?: string | Readonly<Record<string, string>> | null;
  /**
   * Stages unordered rows due at once with no due-index keys (no `shard`):
   * the dispatcher's stream wake delivers them, its backstop finds the ones
   * the stream missed, and each costs one write unit less to stage and one
   * less to settle. Set it only for a dispatcher that runs lean
   * (OUTFLOW_LEAN, published: Published.apply sets it), since no other looks
   * for such rows. Rows of ordered routes and rows with a notBefore are
   * staged in the due index whatever it says. As Go's Config.Lean.
   */
  lean?: boolean;
}

/** Whether routes are given: "" (blank) and an empty record are not. */
export function routesGiven(routes: Config["routes"]): routes is string | Readonly<Record<string, string>> {
  if (routes === undefined || routes === null) return false;
  return typeof routes === "string" ? routes.trim() !== "" : Object.keys(routes).length > 0;
}

/**
 * The table each Config Published.apply made read its routes from, and
 * those routes: a producer whose routes are still those refuses a row of
 * another route naming the table, as outflow enqueue does. Held aside,
 * so a Config stays a plain object; a copy of one (`{...cfg}`) is not
 * remembered, and its routes are called given.
 */
const PUBLISHED_ROUTES = new WeakMap<Config, { table: string; routes: Readonly<Record<string, string>> }>();

/**
 * Where config's routes came from, for a row of a route not in them:
 * "given", or the table the dispatcher published them in (a Config
 * Published.apply made, its routes unchanged).
 */
export function routesFrom(config: Config): string {
  const from = PUBLISHED_ROUTES.get(config);
  if (from === undefined || !routesGiven(config.routes)) return "given";
  const mine = routeStrings(config.routes);
  const names = Object.keys(mine);
  const same = names.length === Object.keys(from.routes).length && names.every((n) => Object.hasOwn(from.routes, n) && from.routes[n] === mine[n]);
  return same ? `the dispatcher published in table ${from.table}` : "given";
}

function sortedUnique(xs: Iterable<string>): string[] {
  return [...new Set(xs)].sort();
}

/** The configuration the dispatcher runs with, as its functions publish it in the outbox table. */
export class Published {
  readonly table: string;
  readonly routes: Readonly<Record<string, string>>;
  /** Each ordered route and what a dead-lettered head does to its group. */
  readonly ordered: Readonly<Record<string, string>>;
  readonly shards: number;
  readonly maxMessageBytes: number;
  readonly revision: number;
  readonly publishedAt: Date;
  readonly publishedBy: string;
  /** The dispatcher's unsure wait in milliseconds, when it publishes one. */
  readonly unsureWaitMs: number | undefined;
  /** The dispatcher's OUTFLOW_LEAN: unordered rows due at once are staged outside the due index (Config.lean). */
  readonly lean: boolean;

  constructor(fields: {
    table: string;
    routes: Record<string, string>;
    ordered: Record<string, string>;
    shards: number;
    maxMessageBytes: number;
    revision: number;
    publishedAt: Date;
    publishedBy?: string;
    unsureWaitMs?: number | undefined;
    lean?: boolean;
  }) {
    this.table = fields.table;
    this.routes = fields.routes;
    this.ordered = fields.ordered;
    this.shards = fields.shards;
    this.maxMessageBytes = fields.maxMessageBytes;
    this.revision = fields.revision;
    this.publishedAt = fields.publishedAt;
    this.publishedBy = fields.publishedBy ?? "";
    this.unsureWaitMs = fields.unsureWaitMs;
    this.lean = fields.lean ?? false;
  }

  /**
   * config with what this publishes filled in where it leaves a field unset
   * (lean among them: unset or false takes the published mode); a field
   * config sets must agree, or ConfigError (published_mismatch) names each
   * difference. A lean the dispatcher does not run is a mismatch, since no
   * backstop would find the rows its stream missed.
   */
  apply(config: Config = {}): Config {
    const cfg: Config = { ...config };
    const diffs: string[] = [];
    if (!cfg.table) cfg.table = this.table;
    else if (this.table && cfg.table !== this.table) diffs.push(`table: published in ${this.table}, Config has ${cfg.table}`);
    if (!cfg.shards) cfg.shards = this.shards;
    else if (cfg.shards !== this.shards) diffs.push(`shards: published ${this.shards}, Config has ${cfg.shards}`);
    if (!cfg.maxMessageBytes) cfg.maxMessageBytes = this.maxMessageBytes;
    else if (cfg.maxMessageBytes !== this.maxMessageBytes) {
      diffs.push(`maxMessageBytes: published ${this.maxMessageBytes}, Config has ${cfg.maxMessageBytes}`);
    }
    if (!routesGiven(cfg.routes)) {
      cfg.routes = { ...this.routes };
    } else {
      const mine = routeStrings(cfg.routes);
      for (const name of sortedUnique([...Object.keys(mine), ...Object.keys(this.routes)])) {
        const a = Object.hasOwn(this.routes, name) ? this.routes[name] : undefined;
        const b = Object.hasOwn(mine, name) ? mine[name] : undefined;
        if (b === undefined) diffs.push(`route ${JSON.stringify(name)}: published (${a}), missing here`);
        else if (a === undefined) diffs.push(`route ${JSON.stringify(name)}: not published, given here (${b})`);
        else if (a !== b) diffs.push(`route ${JSON.stringify(name)}: published ${a}, here ${b}`);
      }
    }
    const publishedOrdered = Object.keys(this.ordered).sort();
    if (cfg.ordered === undefined || cfg.ordered === null) {
      cfg.ordered = publishedOrdered;
    } else {
      const mine = sortedUnique(cfg.ordered);
      if (mine.join(",") !== publishedOrdered.join(",") || mine.length !== publishedOrdered.length) {
        diffs.push(`ordered: published ${publishedOrdered.join(",") || "none"}, Config has ${mine.join(",") || "none"}`);
      }
    }
    if (!cfg.lean) cfg.lean = this.lean;
    else if (!this.lean) diffs.push("lean: the dispatcher does not run lean, Config has lean");
    if (diffs.length > 0) {
      throw new ConfigError(
        "published_mismatch",
        `table ${cfg.table}: differs from the dispatcher's published configuration: ` + diffs.join("; "),
      );
    }
    // The routes are the published ones now: a row of another route is
    // refused naming the table they were published in.
    PUBLISHED_ROUTES.set(cfg, { table: cfg.table ?? this.table, routes: { ...this.routes } });
    return cfg;
  }
}

function routeStrings(routes: string | Readonly<Record<string, string>>): Record<string, string> {
  parseRoutes(routes); // refuses what the producer would
  if (typeof routes !== "string") return { ...routes };
  const out: Record<string, string> = {};
  for (const part of routes.split(",")) {
    const p = part.trim();
    if (!p) continue;
    const i = p.indexOf("=");
    out[(i < 0 ? p : p.slice(0, i)).trim()] = i < 0 ? "" : p.slice(i + 1).trim();
  }
  return out;
}

/**
 * Reads the dispatcher's published configuration from table with one
 * strongly consistent GetItem. None published throws ConfigError
 * (not_published); an item this reader cannot read, ConfigError (malformed).
 * A failed read throws the SDK's error as it is (so `instanceof
 * ResourceNotFoundException` still holds), its message naming the table: a
 * table that does not exist reads `table "x": not found in region R at
 * endpoint E (ResourceNotFoundException)`, as Go's LoadPublished says it.
 */
export async function loadPublished(client: DynamoDBClientLike, table: string): Promise<Published> {
  let out: GetItemCommandOutput;
  try {
    out = await client.send(new GetItemCommand({ TableName: table, Key: { [PK]: { S: CONFIG_KEY } }, ConsistentRead: true }));
  } catch (e) {
    await nameTable(client, table, e);
    throw e;
  }
  const item = out.Item;
  if (item === undefined || Object.keys(item).length === 0) {
    throw new ConfigError(
      "not_published",
      `table ${table}: no dispatcher configuration published (the sweep and wake functions publish it at their first invocation)`,
    );
  }
  return decodePublished(table, item);
}

/**
 * Makes error's message name table, and for a table that does not exist the
 * region and endpoint client looked for it in, where the client tells them
 * (the SDK's DynamoDBClient does).
 */
export async function nameTable(client: unknown, table: string, error: unknown): Promise<void> {
  if (!(error instanceof Error) || error.message.startsWith(`table ${JSON.stringify(table)}: `)) return;
  if (error.name !== "ResourceNotFoundException") {
    error.message = `table ${JSON.stringify(table)}: ${error.message}`;
    return;
  }
  let where = "";
  const config = isRecord(client) && isRecord(client["config"]) ? client["config"] : undefined;
  try {
    const region = await provided(config?.["region"]);
    if (typeof region === "string" && region) where += ` in region ${region}`;
    const endpoint = await provided(config?.["endpoint"]);
    if (isRecord(endpoint) && typeof endpoint["hostname"] === "string") {
      const port = endpoint["port"] ? `:${String(endpoint["port"])}` : "";
      const path = typeof endpoint["path"] === "string" && endpoint["path"] !== "/" ? endpoint["path"] : "";
      where += ` at endpoint ${String(endpoint["protocol"] ?? "https:")}//${endpoint["hostname"]}${port}${path}`;
    }
  } catch {
    // Where it was looked for is a help, not a need: the table is named.
  }
  error.message = `table ${JSON.stringify(table)}: not found${where} (${error.name})`;
}

/** A client setting's value: the SDK keeps some as providers, functions of none that may return a promise. */
async function provided(v: unknown): Promise<unknown> {
  return typeof v === "function" ? await (v as () => unknown)() : v;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null;
}

const WHOLE = /^[+-]?[0-9]+$/;

/** The published configuration from its item. */
export function decodePublished(table: string, item: Readonly<Record<string, unknown>>): Published {
  const problems: string[] = [];
  const num = (name: string): number => {
    const v = item[name];
    if (!isRecord(v) || typeof v["N"] !== "string") {
      problems.push(`${name}: want a number`);
      return 0;
    }
    if (!WHOLE.test(v["N"])) {
      problems.push(`${name}: want a whole number, got ${v["N"]}`);
      return 0;
    }
    return Number(v["N"]);
  };
  const strMap = (name: string): Record<string, string> => {
    const v = item[name];
    if (!isRecord(v) || !isRecord(v["M"])) {
      problems.push(`${name}: want a map of strings`);
      return {};
    }
    const out: Record<string, string> = {};
    for (const [k, e] of Object.entries(v["M"])) {
      if (!isRecord(e) || typeof e["S"] !== "string") {
        problems.push(`${name}.${k}: want a string`);
        continue;
      }
      out[k] = e["S"];
    }
    return out;
  };
  const malformed = (why: string) => new ConfigError("malformed", `table ${table}: item ${JSON.stringify(CONFIG_KEY)}: ${why}`);

  const format = num("format");
  if (problems.length === 0 && format !== CONFIG_FORMAT) {
    throw malformed(`format ${format}: this outflow reads format ${CONFIG_FORMAT}; upgrade it`);
  }
  const routes = strMap("routes");
  const ordered = strMap("ordered");
  const shards = num("shards");
  const maxMessageBytes = num("max_message_bytes");
  const revision = num("revision");
  const publishedAt = num("published_at");
  const by = item["published_by"];
  const wait = item["unsure_wait_ms"];
  let unsureWaitMs: number | undefined;
  if (isRecord(wait) && typeof wait["N"] === "string" && WHOLE.test(wait["N"])) {
    const ms = Number(wait["N"]);
    if (ms > 0) unsureWaitMs = ms;
  }
  if (problems.length > 0) throw malformed(problems.join("; "));
  return new Published({
    table,
    routes,
    ordered,
    shards,
    maxMessageBytes,
    revision,
    publishedAt: new Date(publishedAt),
    publishedBy: isRecord(by) && typeof by["S"] === "string" ? by["S"] : "",
    unsureWaitMs,
    lean: leanOf(item["lean"]),
  });
}

/**
 * Whether a published `lean` says the dispatcher runs lean: only a BOOL true
 * does. Anything else is off: a producer that cannot tell stages rows in the
 * due index, which every dispatcher delivers.
 */
function leanOf(value: unknown): boolean {
  return isRecord(value) && value["BOOL"] === true;
}
