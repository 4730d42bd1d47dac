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
	// KindQuota: the account's credit or quota is exhausted (OpenAI's insufficient_quota,
	// Anthropic's "credit balance is too low"). Waiting does not help, so it is not retried as
	// a rate limit; another provider may still serve the call.
	KindQuota ErrorKind = "insufficient_quota"
	// KindModelNotFound: the provider does not serve the model (misspelt, retired, not
	// pulled). Not retried; another target may serve the call.
	KindModelNotFound ErrorKind = "model_not_found"
	// KindContentPolicy: the provider refused the prompt or the answer under its content
	// policy. Neither retried nor failed over: the same prompt would meet the same refusal,
	// and the caller has a fallback for content it cannot get.
	KindContentPolicy ErrorKind = "content_policy_violation"
	// KindCircuitOpen: the target's circuit breaker is open (it failed repeatedly) or is
	// half-open with its probe in flight; the call was not made. Fails over.
	KindCircuitOpen ErrorKind = "circuit_open"
	// KindBudget: a spending budget refused the call before it was made (see Admitter).
	// Fails over to the next (cheaper) target; never retried.
	KindBudget ErrorKind = "budget_exceeded"
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

// FailsOver reports whether the next target of a tier may serve the call that failed with
// e: retryable errors, and the failures that belong to one provider or model (exhausted
// quota, unknown model, open circuit, a budget of that target) rather than to the request.
func (e *Error) FailsOver() bool {
	if e == nil {
		return false
	}
	switch e.Kind {
	case KindQuota, KindModelNotFound, KindCircuitOpen, KindBudget:
		return true
	}
	return e.Retryable()
}

// FailsOver reports whether err is an *Error after which the next target may be tried.
func FailsOver(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.FailsOver()
}

// healthFailure reports whether err says the target itself is unhealthy (it counts towards
// opening the target's circuit). Errors that are the request's fault (invalid, too long, a
// content policy refusal, output that does not match the schema), a cancellation and a
// budget refusal say nothing about the provider.
func healthFailure(err error) bool {
	switch KindOf(err) {
	case KindRateLimit, KindProvider, KindTimeout, KindUnavailable, KindQuota, KindModelNotFound, KindAuth:
		return true
	}
	return false
}

// hardFailure: the target will not recover by itself within seconds (billing, a missing
// model, a refused key): its circuit opens at the first such failure.
func hardFailure(err error) bool {
	switch KindOf(err) {
	case KindQuota, KindModelNotFound, KindAuth:
		return true
	}
	return false
}

// QuotaMessage reports whether a provider's error message says the account's credit or
// quota is exhausted (as opposed to a rate limit that passes).
func QuotaMessage(msg string) bool {
	m := strings.ToLower(msg)
	for _, s := range []string{"exceeded your current quota", "insufficient_quota", "credit balance is too low",
		"billing", "out of credits", "insufficient balance", "payment required"} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// ContentPolicyMessage reports whether a provider's error message says the content was
// refused under its usage or content policy.
func ContentPolicyMessage(msg string) bool {
	m := strings.ToLower(msg)
	for _, s := range []string{"content_policy_violation", "content filtering policy", "content management policy",
		"safety system", "usage policy", "usage policies", "content_filter"} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// ModelNotFoundMessage reports whether a provider's error message (with a 404 or a
// not-found type) is about the model rather than the URL.
func ModelNotFoundMessage(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "model") && (strings.Contains(m, "not found") || strings.Contains(m, "does not exist") ||
		strings.Contains(m, "not exist") || strings.HasPrefix(m, "model:"))
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
