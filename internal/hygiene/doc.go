// Package hygiene holds the tests of the repository's own rules, such as
// what it may track. It has no code: the rules are scripts in .ci, run by
// make lint, and these tests prove that they refuse what they should.
package hygiene
