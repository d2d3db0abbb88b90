// Package target holds the rules of Outflow's delivery targets (SQS
// queues, SNS topics and EventBridge buses) that need no AWS client: how a
// route's target is written and read (ParseRoutes, ParseTarget), each
// target's limits, and what it would refuse (Validate), with the message
// and event a row becomes. The deliverer (internal/delivery) sends what it
// builds; the producer checks rows with it at staging, and so links none
// of the target services' SDKs.
package target
