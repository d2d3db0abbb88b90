// Package e2e holds the end-to-end soak: from the producer's business
// transaction, through Outflow under faults, to the consumer's own write
// with package consume. It has no code of its own outside its tests.
package e2e
