package mcpx

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/events"
)

// Correlation-id carriers.
const (
	// CorrelationHeader is the HTTP header carrying the correlation id.
	CorrelationHeader = "Worldgate-Correlation-Id"
	// CorrelationMetaKey is the request _meta key carrying the correlation id
	// (works on every transport, including stdio).
	CorrelationMetaKey = "worldgate/correlationId"
	// RetryAfterMetaKey is set in the _meta of a rate-limited tool result.
	RetryAfterMetaKey = "worldgate/retryAfterMs"
)

// Outcomes recorded in worldgate_mcp_tool_calls_total.
const (
	OutcomeOK           = "ok"
	OutcomeInvalidInput = "invalid_input"
	OutcomeNotFound     = "not_found"
	OutcomeToolError    = "tool_error"
	OutcomeRateLimited  = "rate_limited"
	OutcomeProtocol     = "protocol_error"
	OutcomeCanceled     = "canceled"
)

// Metrics are the MCP tool-call metrics. Several servers in one process share
// them (the server name is a label).
type Metrics struct {
	Calls   *prometheus.CounterVec
	Latency *prometheus.HistogramVec
}

// NewMetrics registers (or reuses, if already registered) the tool metrics on reg.
// A nil reg gives unregistered metrics.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	calls := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "worldgate_mcp_tool_calls_total",
		Help: "MCP tool calls by server, tool and outcome.",
	}, []string{"server", "tool", "outcome"})
	lat := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "worldgate_mcp_tool_latency_seconds",
		Help:    "MCP tool call latency by server and tool.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	}, []string{"server", "tool"})
	if reg != nil {
		var err error
		if calls, err = register(reg, calls); err != nil {
			return nil, err
		}
		if lat, err = register(reg, lat); err != nil {
			return nil, err
		}
	}
	return &Metrics{Calls: calls, Latency: lat}, nil
}

func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, err
	}
	return c, nil
}

// InvalidInputError is a tool error caused by arguments the model can correct.
type InvalidInputError struct{ Msg string }

func (e *InvalidInputError) Error() string { return "invalid input: " + e.Msg }

// InvalidInput returns a tool error describing a bad argument.
func InvalidInput(format string, args ...any) error {
	return &InvalidInputError{Msg: fmt.Sprintf(format, args...)}
}

// NotFoundError is a tool error for something that does not exist.
type NotFoundError struct{ Msg string }

func (e *NotFoundError) Error() string { return "not found: " + e.Msg }

// NotFound returns a tool error saying what was looked for.
func NotFound(format string, args ...any) error {
	return &NotFoundError{Msg: fmt.Sprintf(format, args...)}
}

type correlationKey struct{}

// CorrelationID returns the correlation id of the tool call being handled.
func CorrelationID(ctx context.Context) string {
	s, _ := ctx.Value(correlationKey{}).(string)
	return s
}

// WithCorrelationID returns ctx carrying id (used by the client too).
func WithCorrelationID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, correlationKey{}, id)
}

// NewCorrelationID returns a random id.
func NewCorrelationID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func cleanCorrelationID(s string) string {
	if len(s) == 0 || len(s) > 128 {
		return ""
	}
	for _, r := range s {
		if r < 0x21 || r > 0x7e {
			return ""
		}
	}
	return s
}

// InstrumentOptions configure Instrument.
type InstrumentOptions struct {
	// Server is the server label ("world", "lore", "classify").
	Server  string
	Logger  *slog.Logger
	Metrics *Metrics
	// Limiter, if non-nil, limits tool calls per caller (token issuer and
	// subject; "local" for unauthenticated transports).
	Limiter *RateLimiter
	// ArgumentHints say, per tool, what its arguments look like (a sentence
	// with an example); one is added to every refusal of that tool's
	// arguments for their shape (not an object, or against its input schema).
	ArgumentHints map[string]string
}

// Instrument installs, once for all tools of s, the wrapper that every tool
// call passes through: correlation id (header or _meta, else generated),
// per-client rate limit (a tool error saying when to retry), the arguments'
// trust-boundary checks (CheckArguments: one JSON object, no member named
// twice, no null), one JSON log line and the call/latency metrics.
func Instrument(s *mcp.Server, o InstrumentOptions) {
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			ctr, ok := req.(*mcp.CallToolRequest)
			if !ok || method != "tools/call" {
				return next(ctx, method, req)
			}
			start := time.Now()
			tool := ctr.Params.Name
			var cid, subject string
			if ctr.Extra != nil && ctr.Extra.Header != nil {
				cid = cleanCorrelationID(ctr.Extra.Header.Get(CorrelationHeader))
			}
			if cid == "" {
				if v, ok := ctr.Params.Meta[CorrelationMetaKey].(string); ok {
					cid = cleanCorrelationID(v)
				}
			}
			if cid == "" {
				cid = NewCorrelationID()
			}
			if ctr.Extra != nil && ctr.Extra.TokenInfo != nil {
				subject = ctr.Extra.TokenInfo.UserID
			}
			if subject == "" {
				subject = "local"
			}
			client := clientKey(ctr.Extra, subject)
			ctx = WithCorrelationID(ctx, cid)

			var (
				res     mcp.Result
				err     error
				outcome string
			)
			if allowed, wait := o.Limiter.Allow(client); !allowed {
				ms := wait.Milliseconds() + 1
				r := &mcp.CallToolResult{
					Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(
						"rate limit exceeded for %q: retry after %dms", subject, ms)}},
					IsError: true,
				}
				r.Meta = mcp.Meta{RetryAfterMetaKey: ms}
				res, outcome = r, OutcomeRateLimited
			} else if aerr := CheckArguments(tool, ctr.Params.Arguments, o.ArgumentHints[tool]); aerr != nil {
				r := &mcp.CallToolResult{}
				r.SetError(aerr)
				res, outcome = r, OutcomeInvalidInput
			} else {
				res, err = next(ctx, method, req)
				outcome = classify(ctx, res, err)
				readableSchemaErrors(res, o.ArgumentHints[tool])
			}
			if outcome == OutcomeProtocol {
				var je *jsonrpc.Error
				if errors.As(err, &je) && strings.HasPrefix(je.Message, "unknown tool") {
					tool = "_unknown" // keep label cardinality bounded
				}
			}
			d := time.Since(start)
			if o.Metrics != nil {
				o.Metrics.Calls.WithLabelValues(o.Server, tool, outcome).Inc()
				if outcome != OutcomeRateLimited && tool != "_unknown" {
					o.Metrics.Latency.WithLabelValues(o.Server, tool).Observe(d.Seconds())
				}
			}
			attrs := []slog.Attr{
				slog.String("correlationId", cid),
				slog.String("server", o.Server),
				slog.String("tool", ctr.Params.Name),
				slog.String("subject", subject),
				slog.String("outcome", outcome),
				slog.Float64("durationMs", float64(d.Microseconds())/1000),
			}
			level := slog.LevelInfo
			if err != nil {
				attrs = append(attrs, slog.String("error", err.Error()))
				level = slog.LevelWarn
			} else if r, ok := res.(*mcp.CallToolResult); ok && r.IsError {
				if te := r.GetError(); te != nil {
					attrs = append(attrs, slog.String("error", te.Error()))
				}
			}
			logger.LogAttrs(ctx, level, "mcp.tool.call", attrs...)
			return res, err
		}
	})
}

// clientKey is whom a call's rate limit is counted against: the token's issuer and subject
// (one client of one authorization server; the same subject from another issuer, or from the
// static key, is another client), "local" on a transport without tokens.
func clientKey(extra *mcp.RequestExtra, subject string) string {
	if extra == nil || extra.TokenInfo == nil {
		return subject
	}
	if iss, _ := extra.TokenInfo.Extra[TokenExtraIssuer].(string); iss != "" {
		return iss + " " + subject
	}
	return subject
}

// CheckArguments is the trust-boundary check of a tools/call's arguments, made once for every
// Worldgate server before the SDK reads them: they must be one JSON object (the SDK's
// refusal of a string or an array says only "cannot unmarshal"), name no member twice
// (events.CheckJSON: the input schema and the handler would each see only one of the values,
// and a log or a proxy reading the first another) and give no argument as null (the schema
// validator would say `<invalid reflect.Value> has type "null"`). Absent arguments are an
// empty object. hint, if any, says what the tool's arguments look like and is added to a
// refusal of their shape. The error is an *InvalidInputError: a tool error the caller can act on.
func CheckArguments(tool string, args json.RawMessage, hint string) error {
	trimmed := bytes.TrimSpace(args)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return nil
	}
	if trimmed[0] != '{' {
		msg := fmt.Sprintf("the arguments of %s must be a JSON object naming each argument (as its input schema shows), not %s", tool, jsonKind(trimmed))
		if hint != "" {
			msg += ": " + hint
		} else {
			msg += `, e.g. {"name": "value"}`
		}
		return InvalidInput("%s", msg)
	}
	if err := events.CheckJSON("arguments", trimmed); err != nil {
		var inv *events.InvalidError
		if errors.As(err, &inv) && len(inv.Problems) > 0 {
			p := inv.Problems[0]
			where := ""
			if p.Path != "" {
				where = " at " + p.Path
			}
			return InvalidInput("the arguments of %s%s: %s", tool, where, p.Message)
		}
		return InvalidInput("the arguments of %s: %v", tool, err)
	}
	if msg := nullArgument(trimmed); msg != "" {
		return InvalidInput("%s", msg)
	}
	return nil
}

// jsonKind names the kind of a JSON value that is not an object, for an error message.
func jsonKind(v []byte) string {
	switch v[0] {
	case '"':
		return "a string"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	default:
		return "a number"
	}
}

// nullArgument names the first top-level argument given as JSON null.
func nullArgument(args json.RawMessage) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(args, &m) != nil {
		return ""
	}
	names := make([]string, 0, len(m))
	for k, v := range m {
		if string(bytes.TrimSpace(v)) == "null" {
			names = append(names, k)
		}
	}
	if len(names) == 0 {
		return ""
	}
	slices.Sort(names)
	return fmt.Sprintf("argument %q is null: leave it out or give a value of the type the tool's input schema shows", names[0])
}

// readableSchemaErrors rewrites the JSON Schema validator's wording for a null value nested
// deeper than the arguments' top level, and adds the tool's hint, if it has one, to the SDK's
// refusal of its arguments against the input schema.
func readableSchemaErrors(res mcp.Result, hint string) {
	r, ok := res.(*mcp.CallToolResult)
	if !ok || r == nil || !r.IsError {
		return
	}
	schema := false
	if te := r.GetError(); te != nil && strings.HasPrefix(te.Error(), `validating "arguments"`) {
		schema = true
	}
	for _, c := range r.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			t.Text = strings.ReplaceAll(t.Text, "<invalid reflect.Value> has type", "null has type")
			if schema && hint != "" {
				t.Text += " (" + hint + ")"
			}
		}
	}
}

func classify(ctx context.Context, res mcp.Result, err error) string {
	if err != nil {
		if ctx.Err() != nil {
			return OutcomeCanceled
		}
		return OutcomeProtocol
	}
	r, ok := res.(*mcp.CallToolResult)
	if !ok || !r.IsError {
		return OutcomeOK
	}
	te := r.GetError()
	var inv *InvalidInputError
	var nf *NotFoundError
	switch {
	case errors.As(te, &inv):
		return OutcomeInvalidInput
	case errors.As(te, &nf):
		return OutcomeNotFound
	case te != nil && strings.HasPrefix(te.Error(), `validating "arguments"`):
		return OutcomeInvalidInput // rejected by the SDK against the input schema
	case te != nil && (errors.Is(te, context.Canceled) || errors.Is(te, context.DeadlineExceeded)):
		return OutcomeCanceled
	}
	return OutcomeToolError
}
