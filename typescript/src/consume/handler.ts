/**
 * A Lambda SQS handler with partial batch responses that keep a FIFO
 * group's order (Go's consume.Handler, Python's outflow.consume.Handler).
 */

import { GROUP_ATTRIBUTE, fromLambda, type LambdaSQSRecord } from "./decode.js";
import { DuplicateError, LateError, SkippedError, type Message } from "./message.js";

/**
 * Applies one message: resolve (or throw a DuplicateError or LateError)
 * when it is done; throw anything else to have it retried.
 */
export type ApplyFunc = (m: Message) => void | Promise<void>;

/** An SQS event as Lambda gives it to a function subscribed to a queue. */
export interface LambdaSQSEvent {
  readonly Records?: readonly LambdaSQSRecord[] | null | undefined;
}

/** The partial batch response: the messages to retry (turn ReportBatchItemFailures on). */
export interface BatchResponse {
  batchItemFailures: { itemIdentifier: string }[];
}

/** The part of Lambda's context the handler reads. */
export interface LambdaContextLike {
  getRemainingTimeInMillis?: () => number;
}

/** A Handler's hooks. */
export interface HandlerOptions {
  /**
   * Given each message that closes a place (Message.closed), with the same
   * outcomes as apply: an Inbox's close, bound (`(m) => inbox.close(m)`).
   * Absent: such messages are acknowledged unread, which suits a consumer
   * that keeps no order.
   */
  closed?: ApplyFunc | undefined;
  /**
   * Told of each message reported failed and why (a DecodeError for one
   * that cannot be decoded, a SkippedError for one left behind its group's
   * failure), for logging: the response carries only ids.
   */
  onFailure?: ((messageId: string, error: unknown) => void) | undefined;
  /**
   * With a Lambda context, the messages not started when fewer than this
   * many milliseconds remain are reported failed unapplied (default 0).
   */
  reserveMs?: number | undefined;
}

/**
 * Gives m to apply, or a message that closes a place to closed
 * (acknowledged unread when closed is absent). Resolves when the message
 * is done: applied, a duplicate, or recorded late; rejects otherwise.
 * Handler and a receive loop of your own acknowledge the same outcomes
 * with it.
 */
export async function applyMessage(m: Message, apply: ApplyFunc, closed?: ApplyFunc | null): Promise<void> {
  try {
    if (m.closed === "") await apply(m);
    else if (closed) await closed(m);
  } catch (e) {
    if (e instanceof DuplicateError || e instanceof LateError) return;
    throw e;
  }
}

/** Whether the record's queue keeps an order: its ARN says .fifo (a fair queue's messages carry a group too, and keep none). */
function fifo(record: LambdaSQSRecord): boolean {
  const arn = record.eventSourceARN;
  return typeof arn === "string" && arn.endsWith(".fifo");
}

/**
 * A Lambda function for an SQS event source mapping with
 * ReportBatchItemFailures on: `handle(event, context)` applies each
 * message in turn and resolves to the failures to retry.
 *
 * On a FIFO queue (the record's eventSourceARN ends in .fifo), once a
 * message of a group fails, every later message of that group in the
 * batch is reported failed without being applied, so the group is retried
 * from its first failure, in order; the other groups go on. On any other
 * queue each message stands alone, whatever group it carries. A message
 * that cannot be decoded is reported failed, for the queue's redrive
 * policy to take it away.
 */
export class Handler {
  private readonly applyFn: ApplyFunc;
  private readonly closed: ApplyFunc | undefined;
  private readonly onFailure: ((messageId: string, error: unknown) => void) | undefined;
  private readonly reserveMs: number;

  /** A handler that gives each message to apply (and each closing message to options.closed). */
  constructor(apply: ApplyFunc, options: HandlerOptions = {}) {
    if (typeof apply !== "function") throw new TypeError("consume: Handler needs an apply function");
    this.applyFn = apply;
    this.closed = options.closed;
    this.onFailure = options.onFailure;
    this.reserveMs = options.reserveMs ?? 0;
    // Bound, so that `export const handler = h.handle` works as Lambda calls it.
    this.handle = this.handle.bind(this);
  }

  /** Handles one SQS event: the messages to retry. It rejects only if onFailure throws. */
  async handle(event: LambdaSQSEvent, context?: LambdaContextLike): Promise<BatchResponse> {
    const failures: { itemIdentifier: string }[] = [];
    const failedGroups = new Set<string>();
    const fail = (messageId: string, error: unknown) => {
      failures.push({ itemIdentifier: messageId });
      this.onFailure?.(messageId, error);
    };
    for (const record of event.Records ?? []) {
      const messageId = typeof record.messageId === "string" ? record.messageId : "";
      // A FIFO queue's group holds its order: the queue decides, not a group id.
      const group = fifo(record) ? String(record.attributes?.[GROUP_ATTRIBUTE] ?? "") : "";
      if (group !== "" && failedGroups.has(group)) {
        fail(messageId, new SkippedError("not applied: an earlier message of its group failed"));
        continue;
      }
      const remaining = context?.getRemainingTimeInMillis;
      if (typeof remaining === "function" && remaining.call(context) <= this.reserveMs) {
        fail(messageId, new SkippedError("not applied: the invocation is out of time"));
        continue;
      }
      try {
        await applyMessage(fromLambda(record), this.applyFn, this.closed);
      } catch (e) {
        fail(messageId, e);
        if (group !== "") failedGroups.add(group);
      }
    }
    return { batchItemFailures: failures };
  }
}
