/**
 * What became of each message a consumer was given (Go's consume.Outcome,
 * Result and Counts; Python's Outcome, Result and Counts). The Handler, the
 * Poller and the Powertools record handler classify with one function, so
 * the three acknowledge, and count, the same outcomes: nothing a consumer
 * skipped is swallowed where the user cannot see it.
 */

import { DuplicateError, LateError, NoClosedHookError, OrderError, SkippedError, type Message } from "./message.js";

/**
 * Applies one message: resolve (or throw a DuplicateError or LateError)
 * when it is done; throw anything else to have it retried.
 */
export type ApplyFunc = (m: Message) => void | Promise<void>;

/**
 * What became of one message. Applied, Closed, Duplicate and Late are
 * acknowledged (deleted, or left out of a batch's failures); Gap, Failed
 * and Skipped leave the message to come again.
 */
export const Outcome = {
  /** Its effect committed (under LatePolicy.Apply, a late row applied late too). */
  Applied: "applied",
  /** It closes a place, and the closed hook recorded it. */
  Closed: "closed",
  /** It was applied before (DuplicateError). */
  Duplicate: "duplicate",
  /** Its group went past it: recorded, not applied (LateError). */
  Late: "late",
  /** Not its group's turn (an OrderError for a gap): it comes again, and its group waits for the missing place. */
  Gap: "gap",
  /** It could not be decoded, its effect failed, or it closes a place and met no closed hook. */
  Failed: "failed",
  /** Not started: behind a failure or gap of its FIFO group in the batch, or the consumer stopped (or ran out of time) first. */
  Skipped: "skipped",
} as const;
/** One of Outcome's values. */
export type Outcome = (typeof Outcome)[keyof typeof Outcome];

/** Every Outcome, in the order Counts and the per-batch EMF line list them (Go's consume.Outcomes). */
export const OUTCOMES: readonly Outcome[] = Object.freeze([
  Outcome.Applied,
  Outcome.Closed,
  Outcome.Duplicate,
  Outcome.Late,
  Outcome.Gap,
  Outcome.Failed,
  Outcome.Skipped,
]);

/** Whether a message with this outcome is acknowledged: applied, closed, a duplicate or late (Go's Outcome.Done). */
export function isDone(outcome: Outcome): boolean {
  return outcome === Outcome.Applied || outcome === Outcome.Closed || outcome === Outcome.Duplicate || outcome === Outcome.Late;
}

/**
 * The metric the Lambda handler's per-batch EMF line counts an outcome by:
 * its name with a capital ("applied" is Applied), as Go's MetricName gives.
 */
export function metricName(outcome: Outcome): string {
  return outcome.charAt(0).toUpperCase() + outcome.slice(1);
}

/**
 * What became of one message: onResult hears one per message per delivery,
 * so a consumer counts or logs what was skipped where it happened rather
 * than re-deriving it from errors.
 */
export interface Result {
  /** SQS's id of the message. */
  readonly messageId: string;
  /** The message as decoded; undefined when it could not be decoded. */
  readonly message?: Message | undefined;
  /** What became of it. */
  readonly outcome: Outcome;
  /**
   * Why, for every outcome but applied and closed: the DuplicateError or
   * LateError the inbox gave, the OrderError of a gap, the SkippedError of
   * a message not started, the DecodeError or the effect's own error.
   */
  readonly error?: unknown;
}

/**
 * Adds up Results. Its `add` is bound, so `onResult: counts.add` works as
 * the hook of a Handler, a Poller or a record handler, whose calls never
 * overlap; read the counts after the batch, or after run resolves.
 */
export class Counts {
  applied = 0;
  closed = 0;
  duplicate = 0;
  late = 0;
  gap = 0;
  failed = 0;
  skipped = 0;

  /** Counts r. Bound: pass `counts.add` itself as an onResult hook. */
  readonly add = (r: Result): void => {
    // An outcome this version does not know counts as a failure, never as done.
    const o: Outcome = OUTCOMES.includes(r.outcome) ? r.outcome : Outcome.Failed;
    this[o] += 1;
  };

  /** The count of one outcome. */
  of(outcome: Outcome): number {
    return OUTCOMES.includes(outcome) ? this[outcome] : 0;
  }

  /** The number of results counted, every outcome together. */
  get total(): number {
    return OUTCOMES.reduce((n, o) => n + this[o], 0);
  }
}

/**
 * The outcome of applying m (undefined: it could not be decoded) given the
 * error applying it gave (undefined: none). One function for every
 * consumer, so a Handler, a Poller and a record handler never disagree on
 * what counts as done.
 */
export function outcomeOf(m: Pick<Message, "closed"> | undefined, error: unknown): Outcome {
  if (m === undefined) return Outcome.Failed;
  if (error === undefined) return m.closed !== "" ? Outcome.Closed : Outcome.Applied;
  if (error instanceof DuplicateError) return Outcome.Duplicate;
  if (error instanceof LateError) return Outcome.Late;
  if (error instanceof OrderError && error.gap) return Outcome.Gap;
  if (error instanceof SkippedError) return Outcome.Skipped;
  return Outcome.Failed;
}

/**
 * The error a consumer with no closed hook gives a message that closes a
 * place: acknowledging it unread would leave an Inbox's group behind the
 * place for ever, in silence.
 */
function noClosedHook(m: Message): NoClosedHookError {
  return new NoClosedHookError(
    `message ${m.key}, place ${m.seq} of group ${JSON.stringify(m.group)}, closed (${m.closed}): ` +
      "a message that closes a place reached a consumer with no closed hook: " +
      "set closed to your Inbox's close, or to ackClosed if this consumer keeps no order",
  );
}

/**
 * Gives m to apply, or a message that closes a place to closed (a
 * NoClosedHookError when closed is absent), and resolves to its outcome and
 * the error that decided it; it never rejects. Handler, Poller,
 * recordHandler and applyMessage share it.
 */
export async function settle(m: Message, apply: ApplyFunc, closed?: ApplyFunc | null): Promise<[Outcome, unknown]> {
  let error: unknown = undefined;
  try {
    if (m.closed === "") await apply(m);
    else if (closed) await closed(m);
    else error = noClosedHook(m);
  } catch (e) {
    // A throw of undefined is still a failure, not success.
    error = e ?? new Error("the apply function threw undefined");
  }
  return [outcomeOf(m, error), error];
}
