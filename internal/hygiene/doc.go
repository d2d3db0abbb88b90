// Package hygiene holds the repository's own rules and the tests that
// prove them: what it may track (a script in .ci, run by make lint), and
// that no test calls require or t.Fatal from a goroutine other than its
// own (FailNowOffTestGoroutine, run over every test file by
// TestRepository_NoTestStopsFromAnotherGoroutine, in make lint and make
// test).
package hygiene
