// Package delivery sends outbox rows to Amazon SQS: it routes queue names
// to queue URLs, packs SendMessageBatch requests within SQS's count and size
// limits, sets the message attributes and FIFO fields, and classifies every
// per-entry failure as permanent (the sender's fault) or transient.
package delivery
