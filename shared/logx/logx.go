// Package logx sets up Worldgate's structured logs: JSON lines through log/slog, with the
// service name on every record and helpers to carry a correlation id through a context.
package logx

import (
	"context"
	"io"
	"log/slog"
	"strings"
)

// New returns a JSON logger writing to w at level ("debug", "info", "warn", "error").
func New(w io.Writer, service, level string) *slog.Logger {
	var l slog.Level
	switch strings.ToLower(level) {
	case "debug":
		l = slog.LevelDebug
	case "warn":
		l = slog.LevelWarn
	case "error":
		l = slog.LevelError
	default:
		l = slog.LevelInfo
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l})).With("service", service)
}

// Discard is a logger that writes nothing, for tests and benchmarks.
func Discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

type ctxKey struct{}

// WithLogger returns ctx carrying l.
func WithLogger(ctx context.Context, l *slog.Logger) context.Context {
	return context.WithValue(ctx, ctxKey{}, l)
}

// From returns the logger carried by ctx, or fallback (or slog.Default) when none is.
func From(ctx context.Context, fallback *slog.Logger) *slog.Logger {
	if l, ok := ctx.Value(ctxKey{}).(*slog.Logger); ok {
		return l
	}
	if fallback != nil {
		return fallback
	}
	return slog.Default()
}
