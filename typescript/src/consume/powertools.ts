/**
 * A record handler for Powertools for AWS Lambda (TypeScript)'s batch
 * processor (@aws-lambda-powertools/batch), as Python's record_handler is
 * for Powertools for Python: for a Lambda function that already processes
 * its batches with Powertools. Nothing here imports Powertools: the
 * handler is a plain function of a record, so the package does not need
 * Powertools at run time for users who do not use it.
 */

import { fromLambda, type LambdaSQSRecord } from "./decode.js";
import { loud, queueName } from "./handler.js";
import { ConsumeError, type Message } from "./message.js";
import { Outcome, isDone, settle, type ApplyFunc, type Result } from "./outcome.js";

/** A record handler's hooks. */
export interface RecordHandlerOptions {
  /**
   * Given each message that closes a place: `(m) => inbox.close(m)`, or
   * ackClosed for a consumer that keeps no order. Absent: such a record
   * fails with a NoClosedHookError, logged at ERROR and counted, never
   * acknowledged unread. `inbox.recordHandler(effect)` sets it for you.
   */
  closed?: ApplyFunc | undefined;
  /** Where a closing message that met no closed hook is logged (default: console.error). */
  log?: ((line: string) => void) | undefined;
  /** Where its EMF metric line goes (default: standard output, where Lambda reads metrics from). */
  metrics?: ((line: string) => void) | undefined;
  /**
   * Told what became of each record the processor gave it (applied,
   * closed, duplicate, late, gap, failed). Records the processor fails
   * without calling the handler (behind a failure of their FIFO group) are
   * Powertools' to report: they never reach this hook.
   */
  onResult?: ((result: Result) => void) | undefined;
}

/**
 * A record handler for `processPartialResponse` of
 * @aws-lambda-powertools/batch, with `SqsFifoPartialProcessorAsync` on a
 * FIFO queue (it is asynchronous: the synchronous SqsFifoPartialProcessor
 * would take its promise for success) or `new BatchProcessor(EventType.SQS)`
 * on a standard queue. It decodes the record, gives it to apply (or a
 * closing message to options.closed), resolves when it is done
 * (duplicates and late records included), and rejects to have Powertools
 * report it failed: a message that cannot be decoded, a failed effect, a
 * gap, a closing message with no closed hook.
 */
export function recordHandler(apply: ApplyFunc, options: RecordHandlerOptions = {}): (record: LambdaSQSRecord) => Promise<void> {
  if (typeof apply !== "function") throw new TypeError("consume: recordHandler needs an apply function");
  const { closed, log, metrics, onResult } = options;
  return async (record: LambdaSQSRecord): Promise<void> => {
    if (record === null || typeof record !== "object") throw new ConsumeError("recordHandler: not an SQS record");
    const messageId = typeof record.messageId === "string" ? record.messageId : "";
    let message: Message | undefined;
    let outcome: Outcome = Outcome.Failed;
    let error: unknown = undefined;
    try {
      message = fromLambda(record);
    } catch (e) {
      error = e;
    }
    if (message !== undefined) [outcome, error] = await settle(message, apply, closed);
    onResult?.({ messageId, message, outcome, error });
    if (isDone(outcome)) return;
    loud(error, queueName(record.eventSourceARN), messageId, log, metrics);
    throw error;
  };
}
