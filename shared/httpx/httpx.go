// Package httpx holds the HTTP transport the workers' outgoing clients share.
//
// Go's default transport keeps two idle connections per host. A worker calls one MCP server or
// one LLM provider from as many goroutines as it has messages in flight, so with the default
// every call beyond the second closed its connection afterwards and the next one dialled again:
// a TCP handshake (and a TLS one for a provider), fresh buffers and a server goroutine per call.
package httpx

import "net/http"

// MaxIdleConnsPerHost is how many idle connections Transport keeps per host.
const MaxIdleConnsPerHost = 64

// Transport is Go's default transport with MaxIdleConnsPerHost idle connections per host. Clients
// built without a transport of their own use it.
var Transport = func() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 4 * MaxIdleConnsPerHost
	t.MaxIdleConnsPerHost = MaxIdleConnsPerHost
	return t
}()

// Client returns a client on Transport.
func Client() *http.Client { return &http.Client{Transport: Transport} }
