package telemetry

import (
	"io"
	"log/slog"
	"strings"
	"time"
)

// Lambda's application log filter (LoggingConfig.ApplicationLogLevel, with
// LogFormat JSON) reads each stdout or stderr line as a JSON object: the
// level from the "level" key and the time from the "timestamp" key, in RFC
// 3339. A line without a valid level, or without a valid timestamp, counts
// as INFO, so it is dropped at WARN and ERROR. Every line Outflow writes
// carries both keys.
const (
	// LevelKey is the key Lambda reads a line's level from.
	LevelKey = "level"
	// TimestampKey is the key Lambda reads a line's time from.
	TimestampKey = "timestamp"
)

// NewLogger returns a JSON logger writing to w at the level named by
// AWS_LAMBDA_LOG_LEVEL (read through getenv): TRACE and DEBUG log debug,
// WARN warnings, ERROR and FATAL errors, anything else info. Its lines use
// the keys Lambda's log filter reads (LevelKey, TimestampKey).
func NewLogger(w io.Writer, getenv func(string) string) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{
		Level: Level(getenv("AWS_LAMBDA_LOG_LEVEL")),
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			// Only the record's own time: an attribute a caller named
			// "time" is kept as it is (Value.Time panics on other kinds).
			if len(groups) == 0 && a.Key == slog.TimeKey && a.Value.Kind() == slog.KindTime {
				return slog.String(TimestampKey, a.Value.Time().UTC().Format(time.RFC3339Nano))
			}
			return a
		},
	}))
}

// Level maps a Lambda log level name to a slog level.
func Level(name string) slog.Level {
	switch strings.ToUpper(strings.TrimSpace(name)) {
	case "TRACE", "DEBUG":
		return slog.LevelDebug
	case "WARN", "WARNING":
		return slog.LevelWarn
	case "ERROR", "FATAL":
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}

// RecordLevel is the level a record that must always be kept — the
// metrics — is written at: the function's own log level, never below INFO,
// so Lambda's filter keeps it at every level and DEBUG never hides it.
func RecordLevel(getenv func(string) string) string {
	return max(Level(getenv("AWS_LAMBDA_LOG_LEVEL")), slog.LevelInfo).String()
}
