// Package interop holds the test that mixes the languages: Go, Python and
// TypeScript producers stage into the same ordered groups at once, the Go
// dispatcher (the sweep and wake functions' code, in process) delivers to
// one FIFO queue, and a Go, a Python and a TypeScript consumer, each its
// package's receive loop bound to an inbox, sharing one inbox table and
// one consumer name, apply what arrives while the test SIGKILLs and
// restarts them and an operator purges and redrives dead letters. It has
// no code of its own outside its tests; the other languages' producers
// and consumers are the scripts in testdata, run on the packages in
// python/ and typescript/ (make python-test and make typescript-test
// install and build them), and the Go consumer is the test binary run
// again (TestMain).
package interop
