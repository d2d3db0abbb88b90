// Package handler holds the two Lambda handlers — the scheduled sweep and
// the stream wake — and the cold-start setup they share, so that
// functions/*/main.go only wires and the local runner calls the very same
// code.
package handler
