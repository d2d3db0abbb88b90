/**
 * A receive loop for a long-running process (a container, a service), with
 * Go's consume.Poller contract: long polls, a FIFO group's messages applied
 * one at a time in order and the groups concurrently, visibility renewed
 * while a batch applies, deletes batched, and a shutdown on an AbortSignal
 * that finishes what started and gives the rest back at once.
 */

import type {
  ChangeMessageVisibilityBatchCommand,
  ChangeMessageVisibilityBatchCommandOutput,
  DeleteMessageBatchCommand,
  DeleteMessageBatchCommandOutput,
  Message as SQSMessage,
  ReceiveMessageCommand,
  ReceiveMessageCommandOutput,
} from "@aws-sdk/client-sqs";
import { GROUP_ATTRIBUTE, fromQueue } from "./decode.js";
import { loud, queueName } from "./handler.js";
import { SkippedError, type Message } from "./message.js";
import { Outcome, isDone, settle, type ApplyFunc, type Result } from "./outcome.js";

/** The options of an SQS call the Poller makes: the signal that ends a visibility renewal in flight. */
export interface PollerCallOptions {
  abortSignal?: AbortSignal;
}

/**
 * The part of an SQS client a Poller calls: `new SQSClient()` of
 * @aws-sdk/client-sqs is one, and so is a wrapper of your own.
 */
export interface PollerClient {
  send(command: ReceiveMessageCommand, options?: PollerCallOptions): Promise<ReceiveMessageCommandOutput>;
  send(command: DeleteMessageBatchCommand, options?: PollerCallOptions): Promise<DeleteMessageBatchCommandOutput>;
  send(command: ChangeMessageVisibilityBatchCommand, options?: PollerCallOptions): Promise<ChangeMessageVisibilityBatchCommandOutput>;
}

/** A Poller's queue, what it applies, and its hooks. */
export interface PollerOptions {
  /** The SQS client (`new SQSClient({})`). */
  sqs: PollerClient;
  /** The queue's URL: a name ending in .fifo is a FIFO queue, whose groups keep their order. */
  queueUrl: string;
  /**
   * Applies one message, as a Handler's apply does: resolve, or throw a
   * DuplicateError or LateError, when it is done. `inbox.poller(...)`
   * sets it (and closed) from an effect.
   */
  apply: ApplyFunc;
  /**
   * Given the messages that close a place: `(m) => inbox.close(m)`, or
   * ackClosed for a consumer that keeps no order. Absent: such a message
   * is failed with a NoClosedHookError, logged at ERROR and counted, as
   * the Handler does, never deleted unread.
   */
  closed?: ApplyFunc | undefined;
  /** The groups applied at once (on a standard queue: the messages); default 4. */
  concurrency?: number | undefined;
  /**
   * The visibility timeout asked for each message received, in seconds,
   * renewed every third of it while the message's batch applies (a part of
   * a second rounds up, as SQS takes whole seconds); default 30. Over 12
   * hours, SQS's most, is refused by the constructor: SQS would refuse
   * every receive.
   */
  visibility?: number | undefined;
  /**
   * The long poll's wait, in seconds: a part of a second rounds up, so a
   * long poll never turns into a short one spinning on an empty queue; at
   * most 20, SQS's most, which is the default.
   */
  wait?: number | undefined;
  /**
   * Told of each message not applied (failed, or a gap) and why, and of
   * each failed SQS call (messageId ""), for logging.
   */
  onFailure?: ((messageId: string, error: unknown) => void) | undefined;
  /**
   * Told what became of each message received (applied, closed,
   * duplicate, late, gap, failed, skipped), once per message per delivery
   * and one call at a time though groups apply concurrently:
   * `onResult: counts.add` with a Counts.
   */
  onResult?: ((result: Result) => void) | undefined;
  /** Where a closing message that met no closed hook is logged (default: console.error). */
  log?: ((line: string) => void) | undefined;
  /**
   * Where its EMF metric line goes (default: standard output). A Poller
   * writes no per-batch line, as Go's does not: a container's consumer
   * counts with onResult.
   */
  metrics?: ((line: string) => void) | undefined;
}

/** The longest visibility timeout SQS takes, in seconds: 12 hours. */
export const MAX_VISIBILITY = 12 * 60 * 60;
/** The longest long poll SQS takes, in seconds. */
const MAX_WAIT = 20;

type SQSModule = typeof import("@aws-sdk/client-sqs");
let sqsModule: Promise<SQSModule> | undefined;

/**
 * @aws-sdk/client-sqs, loaded on a Poller's first run: a Lambda function
 * that imports this module for its Handler does not load the SQS client at
 * every cold start. It is a peer dependency, so the commands are built by
 * the same copy of the SDK as the client the user passes.
 */
function loadSqs(): Promise<SQSModule> {
  sqsModule ??= import("@aws-sdk/client-sqs").catch((e: unknown) => {
    sqsModule = undefined;
    throw e;
  });
  return sqsModule;
}

/**
 * Resolves after ms, or at once when signal aborts; never rejects, so a
 * backoff or a renewal's wait ends quietly at shutdown.
 */
/** Resolves with what p resolves to, or with undefined once signal aborts first. */
function abandonable<T>(p: Promise<T>, signal: AbortSignal | undefined): Promise<T | undefined> {
  if (signal === undefined) return p;
  if (signal.aborted) return Promise.resolve(undefined);
  return new Promise<T | undefined>((resolve, reject) => {
    const aborted = () => resolve(undefined);
    signal.addEventListener("abort", aborted, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener("abort", aborted);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener("abort", aborted);
        reject(e instanceof Error ? e : new Error(String(e)));
      },
    );
  });
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}

/** A message's SQS id, "" when SQS gave none. */
function idOf(m: SQSMessage): string {
  return m.MessageId ?? "";
}

/** An error from a batch request's failed entry: its code and message, never the message's body. */
class EntryError extends Error {
  /** SQS's code for the entry's failure. */
  readonly code: string;

  constructor(op: string, code: string, message: string) {
    super(`${op}: ${code}: ${message}`);
    this.name = "EntryError";
    this.code = code;
  }
}

/**
 * Consumes a queue from a long-running process: `run(signal)` long-polls,
 * applies each batch's groups concurrently and each group's messages one
 * at a time in order, keeps the batch's messages invisible while they are
 * applied, and deletes the applied ones in one request.
 *
 * A message that fails (or meets a gap) is left to be received again once
 * its visibility timeout lapses, which spaces out its retries. On a FIFO
 * queue the later messages of its group in the batch are not applied
 * (skipped): they are made visible again at once, and SQS gives them only
 * after it. On a standard queue each message stands alone.
 *
 * When the signal aborts, run stops receiving: the messages started are
 * finished and those applied deleted, the messages received but not
 * started are made visible again at once for this or another consumer,
 * and run resolves, without waiting for a long poll in flight. That poll
 * is left to answer (SQS would serve it all the same, to nobody), and
 * what it takes is made visible again and reported skipped, possibly
 * after run resolved; should the process exit first, those messages come
 * back when their visibility timeout lapses, as after a crash.
 */
export class Poller {
  private readonly sqs: PollerClient;
  /** The queue's URL. */
  readonly queueUrl: string;
  private readonly applyFn: ApplyFunc;
  private readonly closed: ApplyFunc | undefined;
  /** The groups applied at once. */
  readonly concurrency: number;
  /** The visibility timeout asked for, in whole seconds. */
  readonly visibility: number;
  /** The long poll's wait, in whole seconds. */
  readonly wait: number;
  private readonly onFailure: ((messageId: string, error: unknown) => void) | undefined;
  private readonly onResult: ((result: Result) => void) | undefined;
  private readonly log: ((line: string) => void) | undefined;
  private readonly metrics: ((line: string) => void) | undefined;
  /** The first error a hook threw: run rejects with it once its batch is settled. */
  private hookError: { error: unknown } | undefined;
  /** Whether run is running. */
  private running = false;

  /** A poller of options.queueUrl; nothing is received until run. */
  constructor(options: PollerOptions) {
    if (options === null || typeof options !== "object") throw new TypeError("consume: Poller needs its options");
    const { sqs, queueUrl, apply } = options;
    if (sqs === null || typeof sqs !== "object" || typeof sqs.send !== "function") throw new TypeError("consume: Poller needs an SQS client (sqs)");
    if (typeof queueUrl !== "string" || queueUrl === "") throw new TypeError("consume: Poller needs a queue URL (queueUrl)");
    if (typeof apply !== "function") throw new TypeError("consume: Poller needs an apply function");
    const visibility = options.visibility ?? 0;
    const wait = options.wait ?? 0;
    const concurrency = options.concurrency ?? 0;
    if (Number.isNaN(visibility) || Number.isNaN(wait) || Number.isNaN(concurrency)) throw new RangeError("consume: Poller's visibility, wait and concurrency must be numbers");
    if (visibility > MAX_VISIBILITY) {
      throw new RangeError(`consume: Poller's visibility ${visibility} s is over SQS's most, ${MAX_VISIBILITY} s (12 hours): SQS would refuse every receive`);
    }
    this.sqs = sqs;
    this.queueUrl = queueUrl;
    this.applyFn = apply;
    this.closed = options.closed;
    // Whole seconds, as SQS takes them, rounded up: a visibility of 1.5 s
    // sent as 1 s would lapse before its renewal every 0.5 s, and a wait of
    // 0.5 s sent as 0 would be a short poll.
    this.visibility = visibility > 0 ? Math.max(Math.ceil(visibility), 1) : 30;
    this.wait = wait > 0 ? Math.min(Math.ceil(wait), MAX_WAIT) : MAX_WAIT;
    this.concurrency = concurrency >= 1 ? Math.floor(concurrency) : 4;
    this.onFailure = options.onFailure;
    this.onResult = options.onResult;
    this.log = options.log;
    this.metrics = options.metrics;
  }

  /**
   * Polls until signal aborts, then finishes the messages it has started,
   * deletes those applied, makes those received but not started visible
   * again at once, and resolves. A failed receive is reported to onFailure
   * and retried after 1 to 6 seconds. It rejects only when a hook
   * (onResult, onFailure, log, metrics) throws, with that error, once the
   * batch it threw in is settled; when @aws-sdk/client-sqs cannot be
   * loaded; or when this Poller is running already.
   */
  async run(signal?: AbortSignal): Promise<void> {
    // One loop per Poller: two would share its hook error, and a shutdown
    // would have to reach both. Make another Poller to poll twice.
    if (this.running) throw new Error("consume: this Poller is running already");
    this.running = true;
    try {
      await this.loop(signal);
    } finally {
      this.running = false;
    }
  }

  /** run's loop: receive and apply until signal aborts. */
  private async loop(signal: AbortSignal | undefined): Promise<void> {
    const sqs = await loadSqs();
    this.hookError = undefined;
    let failures = 0;
    while (!signal?.aborted) {
      let messages: SQSMessage[];
      try {
        const received = this.sqs.send(
          new sqs.ReceiveMessageCommand({
            QueueUrl: this.queueUrl,
            MaxNumberOfMessages: 10,
            WaitTimeSeconds: this.wait,
            VisibilityTimeout: this.visibility,
            MessageAttributeNames: ["All"],
            // The group orders a FIFO queue's messages. The sequence number is
            // asked for as the issue and Python's loop ask; decoding reads only the group.
            MessageSystemAttributeNames: ["MessageGroupId", "SequenceNumber"],
          }),
        );
        // The request is not aborted with the signal: SQS goes on serving a
        // poll whose connection was dropped until its wait ends, and would
        // give what it then receives to a consumer that is gone, invisible
        // for the visibility timeout (a FIFO group with it). run resolves at
        // once instead, and the abandoned poll, when it answers, makes what
        // it received visible again and reports it skipped (as Python's and
        // Go's loops do).
        const out = await abandonable(received, signal);
        if (out === undefined) {
          void received.then(
            async (late) => {
              const taken = late.Messages ?? [];
              if (taken.length === 0) return;
              await this.release(sqs, taken);
              this.skip(taken, new SkippedError("not applied: the poller stopped before it started"));
            },
            () => undefined,
          );
          break;
        }
        messages = out.Messages ?? [];
      } catch (e) {
        if (signal?.aborted) break;
        this.failed("", new Error(`receive: ${e instanceof Error ? e.message : String(e)}`, { cause: e }));
        this.rethrow();
        failures++;
        await sleep(Math.min(failures, 6) * 1000, signal);
        continue;
      }
      failures = 0;
      await this.batch(sqs, messages, signal);
      this.rethrow();
    }
  }

  /** Throws the first error a hook threw, if one did. */
  private rethrow(): void {
    const thrown = this.hookError;
    if (thrown !== undefined) {
      this.hookError = undefined;
      throw thrown.error;
    }
  }

  /** Calls a hook; an error it throws is kept for run to reject with, not let loose mid-batch. */
  private hook(call: () => void): void {
    try {
      call();
    } catch (e) {
      this.hookError ??= { error: e };
    }
  }

  /** Reports a message not applied, or an SQS call that failed (messageId ""). */
  private failed(messageId: string, error: unknown): void {
    this.hook(() => loud(error, queueName(this.queueUrl), messageId, this.log, this.metrics));
    this.hook(() => this.onFailure?.(messageId, error));
  }

  /** Gives r to onResult: JavaScript runs one call at a time, groups applied concurrently or not. */
  private report(r: Result): void {
    this.hook(() => this.onResult?.(r));
  }

  /**
   * Applies one receive's messages: a group's in order, at most
   * concurrency groups at once. It stops starting messages once signal
   * aborts; the messages started are applied, and deleted, regardless.
   */
  private async batch(sqs: SQSModule, messages: readonly SQSMessage[], signal: AbortSignal | undefined): Promise<void> {
    if (messages.length === 0) return;
    const fifo = this.queueUrl.endsWith(".fifo");
    const groups: SQSMessage[][] = [];
    const index = new Map<string, SQSMessage[]>();
    for (const m of messages) {
      const group = m.Attributes?.[GROUP_ATTRIBUTE];
      // A standard queue's message is its own group, a fair queue's too: its group id holds no order.
      if (!fifo || group === undefined) {
        groups.push([m]);
        continue;
      }
      const seen = index.get(group);
      if (seen !== undefined) {
        seen.push(m);
        continue;
      }
      const fresh = [m];
      index.set(group, fresh);
      groups.push(fresh);
    }

    const stop = this.extend(sqs, messages);
    const done: SQSMessage[] = [];
    const unstarted: SQSMessage[] = [];
    let next = 0;
    const worker = async () => {
      for (let g = groups[next++]; g !== undefined; g = groups[next++]) await this.group(g, signal, done, unstarted);
    };
    try {
      await Promise.all(Array.from({ length: Math.min(this.concurrency, groups.length) }, worker));
    } finally {
      await stop();
      await this.delete(sqs, done);
      await this.release(sqs, unstarted);
    }
  }

  /** Applies one group's messages in order, until one is not done or the poller stops. */
  private async group(group: readonly SQSMessage[], signal: AbortSignal | undefined, done: SQSMessage[], unstarted: SQSMessage[]): Promise<void> {
    for (const [i, m] of group.entries()) {
      if (signal?.aborted) {
        this.skip(group.slice(i), new SkippedError("not applied: the poller stopped before it started"));
        unstarted.push(...group.slice(i));
        return;
      }
      if (!(await this.apply(m))) {
        // The group's later messages wait for this one.
        this.skip(group.slice(i + 1), new SkippedError("not applied: an earlier message of its group failed"));
        unstarted.push(...group.slice(i + 1));
        return;
      }
      done.push(m);
    }
  }

  /** Decodes and applies one message, reports its outcome, and says whether it is done. */
  private async apply(m: SQSMessage): Promise<boolean> {
    let message: Message | undefined;
    let outcome: Outcome = Outcome.Failed;
    let error: unknown = undefined;
    try {
      message = fromQueue(this.queueUrl, m);
    } catch (e) {
      error = e;
    }
    if (message !== undefined) [outcome, error] = await settle(message, this.applyFn, this.closed);
    this.report({ messageId: idOf(m), message, outcome, error });
    if (!isDone(outcome)) this.failed(idOf(m), error);
    return isDone(outcome);
  }

  /** Reports messages not started. */
  private skip(messages: readonly SQSMessage[], why: SkippedError): void {
    for (const m of messages) {
      let message: Message | undefined;
      try {
        message = fromQueue(this.queueUrl, m);
      } catch {
        // Reported with no message: it could not be decoded.
      }
      this.report({ messageId: idOf(m), message, outcome: Outcome.Skipped, error: why });
    }
  }

  /**
   * Renews the messages' visibility every third of it until the returned
   * stop is called, which ends a renewal in flight and resolves once the
   * renewals have ended. Renewals run one at a time.
   */
  private extend(sqs: SQSModule, messages: readonly SQSMessage[]): () => Promise<void> {
    const ended = new AbortController();
    const every = (this.visibility * 1000) / 3;
    const loop = (async () => {
      for (;;) {
        await sleep(every, ended.signal);
        if (ended.signal.aborted) return;
        await this.setVisibility(sqs, messages, this.visibility, "extend visibility", ended.signal);
      }
    })();
    return async () => {
      ended.abort();
      await loop;
    };
  }

  /**
   * Makes messages that were not applied (behind their group's failure, or
   * not started at shutdown) visible at once, for this or another consumer
   * to take. The message that failed is left to its visibility timeout,
   * which spaces out its retries; on a FIFO queue SQS gives its group's
   * later messages only after it.
   */
  private async release(sqs: SQSModule, messages: readonly SQSMessage[]): Promise<void> {
    if (messages.length > 0) await this.setVisibility(sqs, messages, 0, "release");
  }

  /** Sets the messages' visibility timeout in one request (a receive gives at most 10). */
  private async setVisibility(sqs: SQSModule, messages: readonly SQSMessage[], seconds: number, op: string, signal?: AbortSignal): Promise<void> {
    let failed;
    try {
      const out = await this.sqs.send(
        new sqs.ChangeMessageVisibilityBatchCommand({
          QueueUrl: this.queueUrl,
          Entries: messages.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: seconds })),
        }),
        signal !== undefined ? { abortSignal: signal } : {},
      );
      failed = out.Failed;
    } catch (e) {
      // A renewal ended by its batch's end is no failure.
      if (!signal?.aborted) this.failed("", new Error(`${op}: ${e instanceof Error ? e.message : String(e)}`, { cause: e }));
      return;
    }
    this.entriesFailed(messages, failed, op);
  }

  /**
   * Deletes the applied messages in one request. A message whose delete
   * fails is received again, and its apply then finds it done (a
   * duplicate).
   */
  private async delete(sqs: SQSModule, messages: readonly SQSMessage[]): Promise<void> {
    if (messages.length === 0) return;
    let failed;
    try {
      const out = await this.sqs.send(
        new sqs.DeleteMessageBatchCommand({
          QueueUrl: this.queueUrl,
          Entries: messages.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle })),
        }),
      );
      failed = out.Failed;
    } catch (e) {
      this.failed("", new Error(`delete: ${e instanceof Error ? e.message : String(e)}`, { cause: e }));
      return;
    }
    this.entriesFailed(messages, failed, "delete");
  }

  /** Reports the entries of a batch request that failed, by their message's id. */
  private entriesFailed(messages: readonly SQSMessage[], failed: readonly { Id?: string | undefined; Code?: string | undefined; Message?: string | undefined }[] | undefined, op: string): void {
    for (const f of failed ?? []) {
      // The entries' ids are their messages' places in the request.
      const m = /^[0-9]+$/.test(f.Id ?? "") ? messages[Number(f.Id)] : undefined;
      if (m !== undefined) this.failed(idOf(m), new EntryError(op, f.Code ?? "", f.Message ?? ""));
    }
  }
}
