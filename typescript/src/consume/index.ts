/**
 * The consumer's half of Outflow (`@outflowhq/outflow/consume`), as Go's
 * package github.com/outflowhq/outflow/consume and Python's
 * outflowhq.consume: decode what reached the queue (fromLambda, fromQueue,
 * fromSqs), apply each row once and in order with an Inbox in your own
 * DynamoDB transaction, guard side effects outside DynamoDB with
 * Idempotency, and consume from Lambda with Handler, from a long-running
 * process with Poller, or from Powertools' batch processor with
 * recordHandler; `inbox.handler(effect)`, `inbox.poller(sqs, queueUrl,
 * effect)` and `inbox.recordHandler(effect)` wire them to an Inbox. Each
 * reports what became of every message (Outcome, Result, Counts). Held to
 * the shared vectors in conformance/consumer/.
 */

export { ATTR_CLOSED, GROUP_ATTRIBUTE, fromLambda, fromQueue, fromSqs, type LambdaSQSRecord, type SQSMessageLike } from "./decode.js";
export {
  Handler,
  METRIC_NAMESPACE,
  METRIC_NO_CLOSED_HOOK,
  ackClosed,
  applyMessage,
  type BatchResponse,
  type HandlerOptions,
  type LambdaContextLike,
  type LambdaSQSEvent,
} from "./handler.js";
export { DEFAULT_HOLD_MS, Idempotency, type IdempotencyClient, type IdempotencyOptions } from "./idempotency.js";
export { ATTR_EXPIRES_AT, ATTR_PK, Inbox, type Effect, type InboxClient, type InboxOptions } from "./inbox.js";
export {
  CLOSED_RESTAGED,
  ConsumeError,
  DecodeError,
  DuplicateError,
  Envelope,
  GapPolicy,
  HoldLostError,
  InProgressError,
  JoinPolicy,
  LateError,
  LatePolicy,
  NoClosedHookError,
  NoGroupError,
  OrderError,
  SkippedError,
  isOrdered,
  newMessage,
  type ConsumeKind,
  type Message,
} from "./message.js";
export { Counts, OUTCOMES, Outcome, isDone, metricName, type ApplyFunc, type Result } from "./outcome.js";
export { MAX_VISIBILITY, Poller, type PollerCallOptions, type PollerClient, type PollerOptions } from "./poller.js";
export { recordHandler, type RecordHandlerOptions } from "./powertools.js";
export type { TransactWriteItem } from "@aws-sdk/client-dynamodb";
