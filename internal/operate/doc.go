// Package operate is what an operator does to an outbox table, shared by
// the outflow CLI and its web console so that both count, list and act
// alike: the backlog report, dead letters with whether each blocks its
// ordered group, one row shown, and redrive and purge in bulk with their
// tally of rows moved and skipped.
package operate
