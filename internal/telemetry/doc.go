// Package telemetry is how Outflow reports: structured JSON logs through
// log/slog at the level Lambda asks for, and one CloudWatch Embedded Metric
// Format record per invocation. Neither ever carries a payload or an
// attribute value.
package telemetry
