package llm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrorKind is a normalized failure class, stable across providers. It is
// also the outcome label of worldgate_ai_requests_total.
type ErrorKind string

// Normalized error kinds.
const (
	KindRateLimit     ErrorKind = "rate_limit_exceeded"
	KindContextLength ErrorKind = "context_length_exceeded"
	KindAuth          ErrorKind = "authentication_error"
	KindInvalid       ErrorKind = "invalid_request"
	KindProvider      ErrorKind = "provider_error"
	KindTimeout       ErrorKind = "timeout"
	KindUnavailable   ErrorKind = "unavailable"
	// KindInvalidOutput: the answer did not match the requested JSON schema,
	// even after the one repair reprompt.
	KindInvalidOutput ErrorKind = "invalid_output"
	// KindCanceled: the caller's context was canceled or its deadline passed.
	KindCanceled ErrorKind = "canceled"
)

// Error is a normalized provider failure. Use errors.As to get it.
type Error struct {
	Kind     ErrorKind
	Provider string
	// Status is the HTTP status, 0 when there was none.
	Status int
	// RetryAfter is the delay the provider asked for (0: none given).
	RetryAfter time.Duration
	Message    string
	// Err is the underlying error, if any (SDK error, net error, ctx error).
	Err error
}

func (e *Error) Error() string {
	if e == nil {
		return "llm: <nil error>"
	}
	var b strings.Builder
	b.WriteString("llm: ")
	if e.Provider != "" {
		b.WriteString(e.Provider)
		b.WriteString(": ")
	}
	b.WriteString(string(e.Kind))
	if e.Status != 0 {
		fmt.Fprintf(&b, " (HTTP %d)", e.Status)
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, "; retry after %s", e.RetryAfter)
	}
	return b.String()
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// Retryable reports whether the same call may succeed later, and so whether
// the Registry retries it and fails over to the next provider. Invalid
// requests, authentication failures, context-length errors and invalid
// output are not retryable.
func (e *Error) Retryable() bool {
	if e == nil {
		return false
	}
	switch e.Kind {
	case KindRateLimit, KindProvider, KindTimeout, KindUnavailable:
		return true
	}
	return false
}

// KindOf returns the normalized kind of err ("" for nil, provider_error for
// errors that are not *Error).
func KindOf(err error) ErrorKind {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	if errors.Is(err, context.Canceled) {
		return KindCanceled
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return KindTimeout
	}
	return KindProvider
}

// IsRetryable reports whether err is a retryable *Error.
func IsRetryable(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Retryable()
}

// KindForStatus maps an HTTP status to a kind, for adapters to start from.
func KindForStatus(status int) ErrorKind {
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return KindAuth
	case status == http.StatusTooManyRequests:
		return KindRateLimit
	case status == http.StatusRequestTimeout || status == http.StatusGatewayTimeout:
		return KindTimeout
	case status == http.StatusServiceUnavailable || status == 529: // 529: Anthropic "overloaded"
		return KindUnavailable
	case status == http.StatusConflict:
		return KindProvider
	case status >= 500:
		return KindProvider
	case status >= 400:
		return KindInvalid
	}
	return KindProvider
}

// TransportError normalizes an error that came without an HTTP status:
// context ends and timeouts, network failures (unavailable), and anything
// else, such as an undecodable answer (provider_error).
func TransportError(provider string, err error) *Error {
	e := &Error{Kind: KindProvider, Provider: provider, Message: err.Error(), Err: err}
	var ne net.Error
	switch {
	case errors.Is(err, context.Canceled):
		e.Kind = KindCanceled
	case errors.Is(err, context.DeadlineExceeded):
		e.Kind = KindTimeout
	case errors.As(err, &ne):
		if ne.Timeout() {
			e.Kind = KindTimeout
		} else {
			e.Kind = KindUnavailable
		}
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET):
		e.Kind = KindUnavailable
	}
	return e
}

// maxHeaderRetryAfter bounds what a Retry-After header may ask for when
// parsed; the Registry applies its own (smaller) bound on top.
const maxHeaderRetryAfter = time.Hour

// ParseRetryAfter reads retry-after-ms, then Retry-After (seconds or an HTTP
// date) from h. It returns 0 when neither is present or parseable.
func ParseRetryAfter(h http.Header, now time.Time) time.Duration {
	if h == nil {
		return 0
	}
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && ms > 0 {
			return seconds(ms / 1000)
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if !(s > 0) { // also NaN
			return 0
		}
		return seconds(s)
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return clampRetryAfter(d)
		}
	}
	return 0
}

// seconds converts without overflow: huge values clamp to the bound.
func seconds(s float64) time.Duration {
	if !(s > 0) {
		return 0
	}
	if s >= maxHeaderRetryAfter.Seconds() {
		return maxHeaderRetryAfter
	}
	return time.Duration(s * float64(time.Second))
}

func clampRetryAfter(d time.Duration) time.Duration {
	if d > maxHeaderRetryAfter {
		return maxHeaderRetryAfter
	}
	return d
}

// ContextLengthMessage reports whether an error message from a provider says
// the prompt did not fit the model's context window.
func ContextLengthMessage(msg string) bool {
	m := strings.ToLower(msg)
	for _, s := range []string{
		"context_length_exceeded", "maximum context length", "context length",
		"prompt is too long", "context window", "too many tokens", "reduce the length",
	} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}
