// Package outbox is Outflow's domain: the outbox row, its state machine, the
// retry policy and the engine that claims due rows, delivers them and settles
// each one as done, retried, dead-lettered or released.
//
// The package knows nothing about AWS. It drives a Store (where rows live and
// every transition is one conditional write) and a Deliverer (where messages
// go), both defined here and implemented at the edges: internal/dynamo and
// internal/delivery.
package outbox
