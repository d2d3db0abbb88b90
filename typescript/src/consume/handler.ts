/**
 * A Lambda SQS handler with partial batch responses that keep a FIFO
 * group's order (Go's consume.Handler, Python's outflowhq.consume.Handler).
 */

import { GROUP_ATTRIBUTE, fromLambda, type LambdaSQSRecord } from "./decode.js";
import { DuplicateError, LateError, NoClosedHookError, SkippedError, type Message } from "./message.js";

/** The metric counted, in CloudWatch embedded metric format, for each closing message that met no closed hook (Go's consume.MetricNoClosedHook). */
export const METRIC_NO_CLOSED_HOOK = "ClosingMessagesWithoutHook";
/** The namespace of the consumer's metrics (Go's consume.MetricNamespace). */
export const METRIC_NAMESPACE = "Outflow/Consumer";

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
   * outcomes as apply: an Inbox's close, bound (`(m) => inbox.close(m)`),
   * or ackClosed for a consumer that keeps no order. Absent: such a
   * message is reported failed with a NoClosedHookError, logged at ERROR
   * and counted (METRIC_NO_CLOSED_HOOK), never acknowledged unread, which
   * would stall an Inbox's group in silence.
   */
  closed?: ApplyFunc | undefined;
  /** Where a closing message that met no closed hook is logged (default: console.error). */
  log?: ((line: string) => void) | undefined;
  /** Where its EMF metric line goes (default: standard output, where Lambda reads metrics from). */
  metrics?: ((line: string) => void) | undefined;
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
 * The closed hook of a consumer that keeps no order: it acknowledges a
 * message that closes a place unread, and says so in the code, where a
 * missing hook said nothing (Go's consume.AckClosed).
 */
export function ackClosed(_m: Message): void {}

/**
 * Makes a wiring mistake impossible to miss: a NoClosedHookError is logged
 * at ERROR with the queue and the fix, and counted as one
 * ClosingMessagesWithoutHook in an EMF line. Other errors pass.
 */
export function loud(error: unknown, queue: string, messageId: string, log?: (line: string) => void, metrics?: (line: string) => void): void {
  if (!(error instanceof NoClosedHookError)) return;
  (log ?? ((l: string) => console.error(l)))(
    `ERROR closing message not acknowledged: no closed hook: queue=${queue} message_id=${messageId}: ${error.message}`,
  );
  const doc = {
    _aws: {
      Timestamp: Date.now(),
      CloudWatchMetrics: [{ Namespace: METRIC_NAMESPACE, Dimensions: [["Queue"]], Metrics: [{ Name: METRIC_NO_CLOSED_HOOK, Unit: "Count" }] }],
    },
    [METRIC_NO_CLOSED_HOOK]: 1,
    Queue: queue,
    message_id: messageId,
    cause: "a message that closes a place reached a consumer with no closed hook",
  };
  (metrics ?? ((l: string) => void process.stdout.write(l + "\n")))(JSON.stringify(doc));
}

/** The last part of a queue's ARN or URL. */
function queueName(arnOrUrl: unknown): string {
  const s = typeof arnOrUrl === "string" ? arnOrUrl : "";
  return s.slice(Math.max(s.lastIndexOf(":"), s.lastIndexOf("/")) + 1);
}

/**
 * Gives m to apply, or a message that closes a place to closed (a
 * NoClosedHookError when closed is absent). Resolves when the message
 * is done: applied, a duplicate, or recorded late; rejects otherwise.
 * Handler and a receive loop of your own acknowledge the same outcomes
 * with it.
 */
export async function applyMessage(m: Message, apply: ApplyFunc, closed?: ApplyFunc | null): Promise<void> {
  try {
    if (m.closed === "") await apply(m);
    else if (closed) await closed(m);
    else
      throw new NoClosedHookError(
        `message ${m.key}, place ${m.seq} of group ${JSON.stringify(m.group)}, closed (${m.closed}): ` +
          "a message that closes a place reached a consumer with no closed hook: " +
          "set closed to your Inbox's close, or to ackClosed if this consumer keeps no order",
      );
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
  private readonly log: ((line: string) => void) | undefined;
  private readonly metrics: ((line: string) => void) | undefined;

  /** A handler that gives each message to apply (and each closing message to options.closed). */
  constructor(apply: ApplyFunc, options: HandlerOptions = {}) {
    if (typeof apply !== "function") throw new TypeError("consume: Handler needs an apply function");
    this.applyFn = apply;
    this.closed = options.closed;
    this.onFailure = options.onFailure;
    this.reserveMs = options.reserveMs ?? 0;
    this.log = options.log;
    this.metrics = options.metrics;
    // Bound, so that `export const handler = h.handle` works as Lambda calls it.
    this.handle = this.handle.bind(this);
  }

  /** Handles one SQS event: the messages to retry. It rejects only if onFailure throws. */
  async handle(event: LambdaSQSEvent, context?: LambdaContextLike): Promise<BatchResponse> {
    const failures: { itemIdentifier: string }[] = [];
    const failedGroups = new Set<string>();
    const fail = (messageId: string, error: unknown, queue = "") => {
      failures.push({ itemIdentifier: messageId });
      loud(error, queue, messageId, this.log, this.metrics);
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
        fail(messageId, e, queueName(record.eventSourceARN));
        if (group !== "") failedGroups.add(group);
      }
    }
    return { batchItemFailures: failures };
  }
}
