// Package dynamo is the outbox store on Amazon DynamoDB: the table schema
// (one Go value that provisioning, tests and the SAM template check agree
// on), the item codec, and every state-machine transition as one
// conditional write.
package dynamo
