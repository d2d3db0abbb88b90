// Package delivery sends outbox rows to their routes' targets: SQS queues
// (SendMessageBatch), SNS topics (PublishBatch) and EventBridge buses
// (PutEvents). It packs each request within the target's count and size
// limits, sets the message attributes and FIFO fields, and classifies every
// per-entry failure as permanent (the sender's fault) or transient. The
// rules it applies to a row (internal/target) are the producer's too.
package delivery
