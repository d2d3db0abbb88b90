// Package leansoak holds the lean soak: lean mode's producers, stream
// wake, backstop and sweep run together on the moto server, in virtual
// time, through a stream outage longer than the stream's retention (25
// hours against 24 in the long form), a throttled stream, crashes of the
// wake between send and settle, and switches of the mode mid-run.
// It has no code of its own outside its tests.
package leansoak
