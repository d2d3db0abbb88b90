// Package consume is the consumer's half of Outflow's guarantee. Outflow
// delivers each row at least once, in order per group on ordered routes;
// this package turns that into one effect per row, in order:
//
//   - Decode reads a Message from whatever reached the consumer's queue:
//     a message Outflow sent to SQS, one an SNS topic passed on (raw, or
//     in SNS's JSON envelope), or an EventBridge event a rule sent on. It
//     reads Lambda's events.SQSMessage (FromLambda) and the SDK's
//     types.Message (FromSQS).
//   - Inbox gives the items a consumer adds to its own DynamoDB
//     TransactWriteItems, so the effect and the record that it happened
//     commit together: a duplicate is refused, and on an ordered group so
//     is a row that is not the next.
//   - Handler is a Lambda SQS handler that reports partial batch failures
//     without breaking a FIFO group's order.
//
// docs/consuming.md says what each mode promises and what it costs.
package consume
