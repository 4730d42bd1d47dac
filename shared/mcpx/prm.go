package mcpx

import (
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// WellKnownProtectedResource is RFC 9728's well-known path prefix.
const WellKnownProtectedResource = "/.well-known/oauth-protected-resource"

// resourceURL is the server's canonical URL: a.Resource, else the request's
// own scheme, host and path (behind a proxy that sets X-Forwarded-Proto).
func resourceURL(a AuthConfig, r *http.Request, path string) string {
	if a.Resource != "" {
		return a.Resource
	}
	scheme := "http"
	if r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https") {
		scheme = "https"
	}
	return scheme + "://" + r.Host + path
}

// metadataURL is where the resource's RFC 9728 metadata is served: the
// well-known prefix followed by the resource's path.
func metadataURL(resource string) string {
	scheme, rest, ok := strings.Cut(resource, "://")
	if !ok {
		return resource
	}
	host, path, _ := strings.Cut(rest, "/")
	if path != "" {
		path = "/" + strings.TrimSuffix(path, "/")
	}
	return scheme + "://" + host + WellKnownProtectedResource + path
}

// ProtectedResourceHandler serves the RFC 9728 metadata of the MCP endpoint
// at path: its resource URL, the authorization servers that issue its tokens
// and the scope it requires.
func ProtectedResourceHandler(a AuthConfig, path, scope string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		servers := a.AuthorizationServers
		if len(servers) == 0 && a.Issuer != "" {
			servers = []string{a.Issuer}
		}
		meta := &oauthex.ProtectedResourceMetadata{
			Resource:               resourceURL(a, r, path),
			AuthorizationServers:   servers,
			ScopesSupported:        []string{scope},
			BearerMethodsSupported: []string{"header"},
			ResourceName:           "Worldgate MCP " + strings.TrimPrefix(path, "/"),
		}
		auth.ProtectedResourceMetadataHandler(meta).ServeHTTP(w, r)
	})
}

// Mount registers an MCP endpoint at path on mux together with its
// protected-resource metadata at /.well-known/oauth-protected-resource<path>
// (and at the bare well-known path when path is "/mcp", the endpoint of a
// server alone on its port).
func Mount(mux *http.ServeMux, path string, h http.Handler, a AuthConfig, scope string) {
	mux.Handle(path, h)
	prm := ProtectedResourceHandler(a, path, scope)
	mux.Handle(WellKnownProtectedResource+path, prm)
	if path == "/mcp" {
		mux.Handle(WellKnownProtectedResource, prm)
	}
}
