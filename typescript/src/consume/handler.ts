/**
 * A Lambda SQS handler with partial batch responses that keep a FIFO
 * group's order (Go's consume.Handler, Python's outflowhq.consume.Handler).
 */

import { GROUP_ATTRIBUTE, fromLambda, type LambdaSQSRecord } from "./decode.js";
import { NoClosedHookError, SkippedError, type Message } from "./message.js";
import { Counts, OUTCOMES, Outcome, isDone, metricName, settle, type ApplyFunc, type Result } from "./outcome.js";

export type { ApplyFunc } from "./outcome.js";

/** The metric counted, in CloudWatch embedded metric format, for each closing message that met no closed hook (Go's consume.MetricNoClosedHook). */
export const METRIC_NO_CLOSED_HOOK = "ClosingMessagesWithoutHook";
/** The namespace of the consumer's metrics (Go's consume.MetricNamespace). */
export const METRIC_NAMESPACE = "Outflow/Consumer";

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
   * would stall an Inbox's group in silence. `inbox.handler(effect)` sets
   * it for you.
   */
  closed?: ApplyFunc | undefined;
  /** Where a closing message that met no closed hook is logged (default: console.error). */
  log?: ((line: string) => void) | undefined;
  /**
   * Where the EMF metric lines go (default: standard output, where Lambda
   * reads metrics from): one per batch counting its outcomes, and one for
   * each closing message that met no closed hook.
   */
  metrics?: ((line: string) => void) | undefined;
  /**
   * Told of each message reported failed and why (a DecodeError for one
   * that cannot be decoded, an OrderError for a gap, a SkippedError for one
   * left behind its group's failure), for logging: the response carries
   * only ids.
   */
  onFailure?: ((messageId: string, error: unknown) => void) | undefined;
  /**
   * Told what became of each message of a batch (applied, closed,
   * duplicate, late, gap, failed, skipped), once per message per delivery
   * and one call at a time, so a consumer counts or logs what it skipped:
   * `onResult: counts.add` with a Counts.
   */
  onResult?: ((result: Result) => void) | undefined;
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

/** Standard output, where Lambda reads EMF lines from. */
function stdout(line: string): void {
  process.stdout.write(line + "\n");
}

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
  (metrics ?? stdout)(JSON.stringify(doc));
}

/**
 * Writes one EMF line counting a batch's outcomes (namespace
 * Outflow/Consumer, dimension Queue, one metric per outcome: Applied,
 * Closed, ...), every metric present even at 0, so a dashboard reads a
 * quiet queue as zeros rather than as missing data (Go's countOutcomes).
 * Only counts and the queue's name: never a payload.
 */
export function countOutcomes(counts: Counts, queue: string, metrics?: (line: string) => void): void {
  const doc: Record<string, unknown> = {
    _aws: {
      Timestamp: Date.now(),
      CloudWatchMetrics: [{ Namespace: METRIC_NAMESPACE, Dimensions: [["Queue"]], Metrics: OUTCOMES.map((o) => ({ Name: metricName(o), Unit: "Count" })) }],
    },
    Queue: queue,
  };
  for (const o of OUTCOMES) doc[metricName(o)] = counts.of(o);
  (metrics ?? stdout)(JSON.stringify(doc));
}

/** The last part of a queue's ARN or URL: the name a metric's Queue dimension gives it. */
export function queueName(arnOrUrl: unknown): string {
  const s = typeof arnOrUrl === "string" ? arnOrUrl : "";
  return s.slice(Math.max(s.lastIndexOf(":"), s.lastIndexOf("/")) + 1);
}

/**
 * Gives m to apply, or a message that closes a place to closed (a
 * NoClosedHookError when closed is absent). Resolves when the message
 * is done: applied, closed, a duplicate, or recorded late; rejects
 * otherwise. Handler, Poller and a receive loop of your own acknowledge
 * the same outcomes with it.
 */
export async function applyMessage(m: Message, apply: ApplyFunc, closed?: ApplyFunc | null): Promise<void> {
  const [outcome, error] = await settle(m, apply, closed);
  if (!isDone(outcome)) throw error;
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
 * message of a group fails or meets a gap, every later message of that
 * group in the batch is reported failed without being applied (skipped),
 * so the group is retried from there, in order; the other groups go on.
 * On any other queue each message stands alone, whatever group it
 * carries. A message that cannot be decoded is reported failed, for the
 * queue's redrive policy to take it away. Each batch's outcomes go to
 * onResult, one by one, and to one EMF line on metrics.
 */
export class Handler {
  private readonly applyFn: ApplyFunc;
  private readonly closed: ApplyFunc | undefined;
  private readonly onFailure: ((messageId: string, error: unknown) => void) | undefined;
  private readonly onResult: ((result: Result) => void) | undefined;
  private readonly reserveMs: number;
  private readonly log: ((line: string) => void) | undefined;
  private readonly metrics: ((line: string) => void) | undefined;

  /** A handler that gives each message to apply (and each closing message to options.closed). */
  constructor(apply: ApplyFunc, options: HandlerOptions = {}) {
    if (typeof apply !== "function") throw new TypeError("consume: Handler needs an apply function");
    this.applyFn = apply;
    this.closed = options.closed;
    this.onFailure = options.onFailure;
    this.onResult = options.onResult;
    this.reserveMs = options.reserveMs ?? 0;
    this.log = options.log;
    this.metrics = options.metrics;
    // Bound, so that `export const handler = h.handle` works as Lambda calls it.
    this.handle = this.handle.bind(this);
  }

  /** Handles one SQS event: the messages to retry. It rejects only if onResult or onFailure throws. */
  async handle(event: LambdaSQSEvent, context?: LambdaContextLike): Promise<BatchResponse> {
    const failures: { itemIdentifier: string }[] = [];
    const failedGroups = new Set<string>();
    const counts = new Counts();
    const records = event.Records ?? [];
    const report = (record: LambdaSQSRecord, message: Message | undefined, outcome: Outcome, error: unknown) => {
      const messageId = typeof record.messageId === "string" ? record.messageId : "";
      const result: Result = { messageId, message, outcome, error };
      counts.add(result);
      this.onResult?.(result);
      if (isDone(outcome)) return;
      failures.push({ itemIdentifier: messageId });
      loud(error, queueName(record.eventSourceARN), messageId, this.log, this.metrics);
      this.onFailure?.(messageId, error);
    };
    for (const record of records) {
      // A FIFO queue's group holds its order: the queue decides, not a group id.
      const group = fifo(record) ? String(record.attributes?.[GROUP_ATTRIBUTE] ?? "") : "";
      // Decoded first, so that a message skipped is reported with what it is.
      let message: Message | undefined;
      let decodeError: unknown = undefined;
      try {
        message = fromLambda(record);
      } catch (e) {
        decodeError = e;
      }
      if (group !== "" && failedGroups.has(group)) {
        report(record, message, Outcome.Skipped, new SkippedError("not applied: an earlier message of its group failed"));
        continue;
      }
      const remaining = context?.getRemainingTimeInMillis;
      if (typeof remaining === "function" && remaining.call(context) <= this.reserveMs) {
        report(record, message, Outcome.Skipped, new SkippedError("not applied: the invocation is out of time"));
        continue;
      }
      const [outcome, error] = message === undefined ? [Outcome.Failed, decodeError] : await settle(message, this.applyFn, this.closed);
      report(record, message, outcome, error);
      if (!isDone(outcome) && group !== "") failedGroups.add(group);
    }
    if (records.length > 0) countOutcomes(counts, queueName(records[0]?.eventSourceARN), this.metrics);
    return { batchItemFailures: failures };
  }
}
