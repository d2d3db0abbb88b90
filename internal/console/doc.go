// Package console is outflow ui: a web console for the operator of an
// outbox table, served as HTML from html/template with no JavaScript. Its
// pages are the overview (the backlog as outflow stats counts it, blocked
// groups, the stray-row audit, the stack's metrics), the dead letters
// (filtered, paged through the dead index), one row, the blocked ordered
// groups, and the redrive and purge actions, which make the same
// conditional writes as the CLI (package operate).
//
// It defends itself as a local admin tool must: every request must name
// the bound Host (against DNS rebinding), every state-changing request is
// a POST that carries the console's CSRF token, a strict
// Content-Security-Policy forbids scripts, every value is escaped by
// html/template, and a console bound beyond loopback asks for an access
// token. Nothing it logs holds a payload.
package console
