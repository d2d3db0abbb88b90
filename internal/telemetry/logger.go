package telemetry

import (
	"io"
	"log/slog"
	"strings"
)

// NewLogger returns a JSON logger writing to w at the level named by
// AWS_LAMBDA_LOG_LEVEL (read through getenv): TRACE and DEBUG log debug,
// WARN warnings, ERROR and FATAL errors, anything else info.
func NewLogger(w io.Writer, getenv func(string) string) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: Level(getenv("AWS_LAMBDA_LOG_LEVEL"))}))
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
