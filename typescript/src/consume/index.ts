/**
 * The consumer's half of Outflow (`@outflowhq/outflow/consume`), as Go's
 * package github.com/outflowhq/outflow/consume and Python's
 * outflowhq.consume: decode what reached the queue (fromLambda, fromQueue,
 * fromSqs), apply each row once and in order with an Inbox in your own
 * DynamoDB transaction, guard side effects outside DynamoDB with
 * Idempotency, and consume from Lambda with Handler. Held to the shared
 * vectors in conformance/consumer/.
 */

export { ATTR_CLOSED, GROUP_ATTRIBUTE, fromLambda, fromQueue, fromSqs, type LambdaSQSRecord, type SQSMessageLike } from "./decode.js";
export {
  Handler,
  METRIC_NAMESPACE,
  METRIC_NO_CLOSED_HOOK,
  ackClosed,
  applyMessage,
  type ApplyFunc,
  type BatchResponse,
  type HandlerOptions,
  type LambdaContextLike,
  type LambdaSQSEvent,
} from "./handler.js";
export { DEFAULT_HOLD_MS, Idempotency, type IdempotencyClient, type IdempotencyOptions } from "./idempotency.js";
export { ATTR_EXPIRES_AT, ATTR_PK, Inbox, type InboxClient, type InboxOptions } from "./inbox.js";
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
export type { TransactWriteItem } from "@aws-sdk/client-dynamodb";
