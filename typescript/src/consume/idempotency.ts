/**
 * Idempotent side effects outside DynamoDB (Go's consume.Idempotency): a
 * record per message, in progress with a hold while the effect runs,
 * completed after, in the same table layout as Go's and Python's.
 */

import { randomBytes } from "node:crypto";
import {
  DeleteItemCommand,
  GetItemCommand,
  PutItemCommand,
  UpdateItemCommand,
  type AttributeValue,
  type DeleteItemCommandOutput,
  type GetItemCommandOutput,
  type PutItemCommandOutput,
  type UpdateItemCommandOutput,
} from "@aws-sdk/client-dynamodb";
import { ATTR_EXPIRES_AT, errorName, keyOf, validConsumer } from "./inbox.js";
import { ConsumeError, DuplicateError, HoldLostError, InProgressError, type Message } from "./message.js";

const STATUS = "status";
const TOKEN = "token";
const HELD_UNTIL = "held_until";
const CONSUMER = "consumer";
const AT = "at";
const IN_PROGRESS = "in_progress";
const COMPLETED = "completed";

/**
 * A hold when none is given: Lambda's longest timeout, so that no
 * invocation outlives its hold. Give a shorter one when the effect is
 * bounded more tightly: a copy whose first try crashed waits it out.
 */
export const DEFAULT_HOLD_MS = 15 * 60 * 1000;

/** The part of a DynamoDB client Idempotency calls: `new DynamoDBClient()` is one. */
export interface IdempotencyClient {
  send(command: PutItemCommand): Promise<PutItemCommandOutput>;
  send(command: UpdateItemCommand): Promise<UpdateItemCommandOutput>;
  send(command: DeleteItemCommand): Promise<DeleteItemCommandOutput>;
  send(command: GetItemCommand): Promise<GetItemCommandOutput>;
}

/** How long records hold and are kept. */
export interface IdempotencyOptions {
  /**
   * How long an in-progress record keeps other copies out, in
   * milliseconds: make it longer than the effect can run (the Lambda
   * function's timeout). Past it, a copy may take the record over and run
   * the effect again. Default: DEFAULT_HOLD_MS.
   */
  hold?: number;
  /** How long a completed record is kept, in milliseconds (0 or absent: for ever). */
  ttl?: number;
  /** Now (default: the wall clock). */
  clock?: () => Date;
}

const BASE32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

/** 26 random base32 characters (130 bits), as Go's crypto/rand.Text gives. */
function newToken(): string {
  // 256 is a multiple of 32: each byte's low 5 bits are uniform.
  return Array.from(randomBytes(26), (b) => BASE32[b & 31]).join("");
}

/**
 * Runs a side effect once per message as far as the effect allows: a copy
 * is skipped (DuplicateError) once the effect completed, and refused
 * (InProgressError: retry later) while another copy runs it.
 *
 * This is effectively once when the effect itself is idempotent, or when
 * a crash between the effect and its completed record is rare enough to
 * accept: such a crash, or an effect that outlives its hold, lets a later
 * copy run the effect again.
 */
export class Idempotency {
  /** The table of the records (a string partition key "pk"). */
  readonly table: string;
  /** The consumer's name, as an Inbox's. */
  readonly consumer: string;
  private readonly client: IdempotencyClient;
  private readonly hold: number;
  private readonly ttl: number;
  private readonly clock: () => Date;

  /** An Idempotency for the consumer in table. */
  constructor(client: IdempotencyClient, table: string, consumer: string, options: IdempotencyOptions = {}) {
    if (client === null || client === undefined) throw new TypeError("idempotency: no DynamoDB client");
    if (table === "") throw new TypeError("idempotency: no table");
    if (!validConsumer(consumer)) throw new TypeError(`idempotency: consumer name ${JSON.stringify(consumer)} must be non-empty, without spaces`);
    const hold = options.hold ?? DEFAULT_HOLD_MS;
    const ttl = options.ttl ?? 0;
    if (!(hold > 0)) throw new RangeError("idempotency: hold must be positive");
    if (!(ttl >= 0)) throw new RangeError("idempotency: TTL must not be negative");
    this.client = client;
    this.table = table;
    this.consumer = consumer;
    this.hold = hold;
    this.ttl = ttl;
    this.clock = options.clock ?? (() => new Date());
  }

  /**
   * Runs effect for the message unless this consumer completed it
   * (DuplicateError: acknowledge) or another copy is running it
   * (InProgressError: retry later), and resolves to what it returns. An
   * effect that throws releases its record, so a retry runs it again; its
   * error is thrown as it is. A HoldLostError says the effect ran past its
   * hold: another copy may have run it too.
   */
  async do<T>(m: Message, effect: () => T | Promise<T>): Promise<T> {
    if (m.key === "") throw new ConsumeError("idempotency: a message without a key");
    const key = keyOf(`idempotency ${this.consumer} ${m.key}`);
    const token = newToken();
    await this.begin(m.key, key, token);
    let result: T;
    try {
      result = await effect();
    } catch (e) {
      await this.release(key, token);
      throw e;
    }
    await this.complete(m.key, key, token);
    return result;
  }

  /** Writes the in-progress record, unless a completed record or another copy's unexpired hold is there. */
  private async begin(msgKey: string, key: Record<string, AttributeValue>, token: string): Promise<void> {
    const nowMs = this.clock().getTime();
    const untilMs = nowMs + this.hold;
    const item: Record<string, AttributeValue> = {
      ...key,
      [STATUS]: { S: IN_PROGRESS },
      [TOKEN]: { S: token },
      [HELD_UNTIL]: { N: String(untilMs) },
      // An abandoned hold is deleted in time too.
      [ATTR_EXPIRES_AT]: { N: String(Math.floor((untilMs + this.ttl) / 1000) + 1) },
      [CONSUMER]: { S: this.consumer },
    };
    let current: Record<string, AttributeValue> | undefined;
    try {
      await this.client.send(
        new PutItemCommand({
          TableName: this.table,
          Item: item,
          ConditionExpression: "attribute_not_exists(#pk) OR (#status = :in_progress AND #held_until < :now)",
          ExpressionAttributeNames: { "#pk": "pk", "#status": STATUS, "#held_until": HELD_UNTIL },
          ExpressionAttributeValues: { ":in_progress": { S: IN_PROGRESS }, ":now": { N: String(nowMs) } },
          ReturnValuesOnConditionCheckFailure: "ALL_OLD",
        }),
      );
      return;
    } catch (e) {
      if (errorName(e) !== "ConditionalCheckFailedException") throw e;
      current = (e as { Item?: Record<string, AttributeValue> }).Item;
    }
    if (current === undefined || Object.keys(current).length === 0) {
      const out = await this.client.send(new GetItemCommand({ TableName: this.table, Key: key, ConsistentRead: true }));
      current = out.Item ?? {};
    }
    if (current[STATUS]?.S === COMPLETED) throw new DuplicateError(`message ${msgKey}: already applied`);
    // The hold is this copy's own: the put applied, its answer was lost,
    // and the SDK's retry was refused by the record it wrote. The token is
    // random per call, so no other copy holds it.
    if (current[TOKEN]?.S === token) return;
    throw new InProgressError(`message ${msgKey}: another copy is in progress`);
  }

  /** Deletes this copy's in-progress record after its effect failed, so a retry need not wait out the hold. */
  private async release(key: Record<string, AttributeValue>, token: string): Promise<void> {
    try {
      await this.client.send(
        new DeleteItemCommand({
          TableName: this.table,
          Key: key,
          ConditionExpression: "#token = :token",
          ExpressionAttributeNames: { "#token": TOKEN },
          ExpressionAttributeValues: { ":token": { S: token } },
        }),
      );
    } catch {
      // The hold expires: the effect's own error is the one to report.
    }
  }

  /** Marks the record completed, if this copy still holds it. */
  private async complete(msgKey: string, key: Record<string, AttributeValue>, token: string): Promise<void> {
    const nowMs = this.clock().getTime();
    const names = { "#status": STATUS, "#at": AT, "#held_until": HELD_UNTIL, "#token": TOKEN, "#expires_at": ATTR_EXPIRES_AT };
    const values: Record<string, AttributeValue> = { ":completed": { S: COMPLETED }, ":at": { N: String(nowMs) }, ":token": { S: token } };
    let update: string;
    if (this.ttl > 0) {
      values[":expires_at"] = { N: String(Math.floor((nowMs + this.ttl) / 1000)) };
      update = "SET #status = :completed, #at = :at, #expires_at = :expires_at REMOVE #held_until";
    } else {
      update = "SET #status = :completed, #at = :at REMOVE #held_until, #expires_at";
    }
    try {
      await this.client.send(
        new UpdateItemCommand({
          TableName: this.table,
          Key: key,
          UpdateExpression: update,
          ConditionExpression: "#token = :token",
          ExpressionAttributeNames: names,
          ExpressionAttributeValues: values,
        }),
      );
    } catch (e) {
      if (errorName(e) === "ConditionalCheckFailedException") {
        throw new HoldLostError(`message ${msgKey}: the effect outlived its hold: another copy may have run it too`);
      }
      throw new ConsumeError(`message ${msgKey}: the effect ran; mark it completed: ${e instanceof Error ? e.message : String(e)}`, "error", { cause: e });
    }
  }
}
