// Package llm is Worldgate's LLM provider layer: one Provider interface, a
// Registry that routes a request to a model tier, retries and fails over
// across providers, enforces JSON-schema output, prices every call and
// records Prometheus metrics once for all providers.
//
// Adapters live in sub-packages (openai, anthropic, scripted); they translate
// a Request into a provider's wire format and normalize its answers and errors
// into Response and *Error. They do no retrying, pricing or metrics of their
// own: that is the Registry's job, so policy is written once.
//
// This package never writes to the world and knows nothing about MCP, NATS or
// proposals; callers (the ai-worker) run the tool loop and record provenance.
package llm
