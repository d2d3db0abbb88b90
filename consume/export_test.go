package consume

import "time"

// SetNow sets the clock an Idempotency reads, for tests of its hold.
func SetNow(i *Idempotency, now func() time.Time) { i.now = now }
