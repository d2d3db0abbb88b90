package outbox

// WithSerial makes the engine run each call on its caller's goroutine, one
// request at a time (see Engine.serial), for the soak's seeded schedule.
func WithSerial() Option { return func(e *Engine) { e.serial = true } }
