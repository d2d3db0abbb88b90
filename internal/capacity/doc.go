// Package capacity sizes deployments by simulation: it runs the real
// engine (outbox.Engine's SweepPartition and DeliverKeys) against a
// simulated DynamoDB store and SQS sink in virtual time (testing/synctest),
// with the latencies, the per-shard index write ceiling, the SDK's retries
// and Lambda's schedule, timeout and concurrency modeled, so a million-row
// backlog drains in seconds of CPU. The scenarios are in this package's
// non-test files; TestCapacityModel runs them when asked (see
// model_test.go) and writes a Report as JSON, which cmd/outflow-bench
// renders as docs/capacity.md.
package capacity
