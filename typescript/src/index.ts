/**
 * Stage outbox rows for the Outflow dispatcher from TypeScript and
 * JavaScript, on the AWS SDK for JavaScript v3.
 *
 * Build a Row, then either `producer.put` it on its own, or add
 * `await producer.transactItem(row)` to the TransactWriteItems that writes
 * your business data, so the message is sent if and only if your write
 * commits. Every row is checked against what its route's target accepts,
 * with the same rules, and the same error kinds, as the Go package
 * github.com/outflowhq/outflow.
 */

export {
  ConfigError,
  InvalidRowError,
  ItemError,
  KINDS,
  OutflowError,
  PutError,
  StagingError,
  TransactError,
  type Kind,
} from "./errors.js";
export { MAX_TRANSACT_ITEMS, Producer, type ProducerOptions, type TransactWriteItem } from "./producer.js";
export { Published, decodePublished, loadPublished, type Config, type DynamoDBClientLike } from "./published.js";
export { MAX_ORDERED_ATTRIBUTES, MAX_OWN_ATTRIBUTES, storedAttributes, validateRow, type Row } from "./row.js";
export { parseRoutes, type Target, type TargetKind } from "./target.js";
export { currentTraceParent } from "./trace.js";
export { VERSION } from "./version.js";
