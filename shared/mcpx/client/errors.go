package client

import (
	"errors"
	"fmt"
	"time"
)

// Kind classifies a client error so an agent can fall back without crashing.
type Kind string

// Error kinds.
const (
	// KindUnavailable: the server offering the tool is not connected (down,
	// unreachable, refusing our token); the client is reconnecting.
	KindUnavailable Kind = "unavailable"
	// KindNotAllowed: the tool is outside the role's allow-list; nothing was sent.
	KindNotAllowed Kind = "not_allowed"
	// KindToolError: the server ran the call and reported an error (bad input,
	// not found, rate limited, unknown tool). The message is meant for the model.
	KindToolError Kind = "tool_error"
	// KindTimeout: no answer within the call timeout (after one retry).
	KindTimeout Kind = "timeout"
	// KindClosed: the client was closed.
	KindClosed Kind = "closed"
)

// Sentinels for errors.Is.
var (
	ErrUnavailable = &Error{Kind: KindUnavailable}
	ErrNotAllowed  = &Error{Kind: KindNotAllowed}
	ErrToolError   = &Error{Kind: KindToolError}
	ErrTimeout     = &Error{Kind: KindTimeout}
	ErrClosed      = &Error{Kind: KindClosed}
)

// Error is every error Call returns.
type Error struct {
	Kind   Kind
	Server string
	Tool   string
	// Message is the tool's own error text for KindToolError.
	Message string
	// RetryAfter is set when the server rate-limited the call.
	RetryAfter time.Duration
	Err        error
}

func (e *Error) Error() string {
	s := fmt.Sprintf("mcp %s", e.Kind)
	if e.Server != "" {
		s += " server=" + e.Server
	}
	if e.Tool != "" {
		s += " tool=" + e.Tool
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// Is matches on Kind, so errors.Is(err, client.ErrUnavailable) works.
func (e *Error) Is(target error) bool {
	var t *Error
	if errors.As(target, &t) && t.Server == "" && t.Tool == "" && t.Err == nil && t.Message == "" {
		return t.Kind == e.Kind
	}
	return false
}

// KindOf returns the kind of err ("" if it is not a client error).
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return ""
}
