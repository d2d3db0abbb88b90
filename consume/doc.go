// Package consume is the consumer's half of Outflow's guarantee. Outflow
// delivers each row at least once, in order per group on ordered routes;
// this package turns that into one effect per row, in order:
//
//   - Decode reads a Message from whatever reached the consumer's queue:
//     a message Outflow sent to SQS, one an SNS topic passed on (raw, or
//     in SNS's JSON envelope), or an EventBridge event a rule sent on. It
//     reads Lambda's events.SQSMessage (FromLambda) and the SDK's
//     types.Message, with the URL of the queue it came from (FromQueue,
//     which tells a FIFO queue from one that keeps no order) or alone
//     (FromSQS, for FIFO queues).
//   - Inbox gives the items a consumer adds to its own DynamoDB
//     TransactWriteItems, so the effect and the record that it happened
//     commit together: a duplicate is refused, and on an ordered group so
//     is a row that is not the next. It also records the places Outflow
//     closes (Close) and the rows that come late.
//   - Idempotency runs a side effect outside DynamoDB once per row, as
//     far as the effect allows: a copy is skipped once the effect
//     completed, and refused, to be retried, while another copy runs it.
//   - Handler is a Lambda SQS handler that reports partial batch failures
//     without breaking a FIFO group's order.
//   - Poller consumes a queue from a long-running process: it long-polls,
//     applies each batch's groups concurrently and each group in order,
//     and deletes what it applied.
//
// docs/consuming.md says what each mode promises and what it costs.
package consume
