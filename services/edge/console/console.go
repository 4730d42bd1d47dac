// Package console is the /play console: a plain HTML and JavaScript page, embedded in the binary
// (no build step), through which a person walks the world, talks to its NPCs and asks for
// quests, using only edge's public API (POST /v1/events, GET /v1/outcomes, GET
// /v1/events/{id}/journey) — what a game client would. Every text from the world or the AI is
// rendered with textContent, never as HTML. A side panel shows each event's journey: the gates
// passed or the refusing gate and its reason, reprompts, fallback, tokens and cost — and, for a
// request that took several attempts, each attempt's gate decisions and the whole request's
// tokens and cost.
package console

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

//go:embed static
var static embed.FS

// Config configures the console.
type Config struct {
	// Key is the API key the page uses: one that acts only for Player (edge.PlayerKey), since
	// whoever opens the page holds it. Empty: the console serves no key (GET /play/config.json
	// is 404).
	Key string
	// Player is the player the page plays as; Start says where that player is now.
	Player string
	Start  func(ctx context.Context) (string, error)
	// Location reads a location (name, description, exits, occupants) for the page.
	Location func(ctx context.Context, id string) (any, error)
	// Hosts are host names (besides localhost and IP addresses) under which the console may be
	// reached and hand out its key, e.g. "dev.example:8088".
	Hosts []string
}

var locationID = regexp.MustCompile(`^loc:[a-z0-9][a-z0-9_-]{0,62}$`)

// Routes are the console's routes, to serve beside the API (edge.Config.Extra).
func Routes(cfg Config) map[string]http.Handler {
	sub, _ := fs.Sub(static, "static")
	files := http.StripPrefix("/play/", http.FileServerFS(sub))
	return map[string]http.Handler{
		"GET /play/": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; script-src 'self'; connect-src 'self'")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			files.ServeHTTP(w, r)
		}),
		"GET /play": http.RedirectHandler("/play/", http.StatusFound),
		"GET /play/config.json": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Cache-Control", "no-store")
			w.Header().Set("Vary", "Origin, Sec-Fetch-Site")
			if cfg.Key == "" {
				http.Error(w, "this edge serves no console key: the /play console runs under worldgate dev", http.StatusNotFound)
				return
			}
			if why := crossOrigin(r, cfg.Hosts); why != "" {
				http.Error(w, "the console's key is served only to the console's own page: "+why, http.StatusForbidden)
				return
			}
			start, err := cfg.Start(r.Context())
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]string{"key": cfg.Key, "player": cfg.Player, "start": start})
		}),
		"GET /play/location/{id}": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id := r.PathValue("id")
			if !locationID.MatchString(id) {
				http.Error(w, "not a location id", http.StatusBadRequest)
				return
			}
			loc, err := cfg.Location(r.Context(), id)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(loc)
		}),
	}
}

// crossOrigin says why r may not be answered with the console's key ("" when it may): it must
// come from the console's own page, under a host the console knows. A browser names the page
// that asks in Origin (sent on cross-origin fetches) and Sec-Fetch-Site; a page on another
// site that points its own name at this address (DNS rebinding) is caught by the Host.
func crossOrigin(r *http.Request, hosts []string) string {
	if !knownHost(r.Host, hosts) {
		return fmt.Sprintf("host %q is not this edge's: open the console at its own address (localhost or an IP address)", r.Host)
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return fmt.Sprintf("the request comes from another site (Sec-Fetch-Site: %s)", site)
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || !strings.EqualFold(u.Host, r.Host) {
			return fmt.Sprintf("the request comes from the page of origin %q, not this edge's", o)
		}
	}
	return ""
}

// knownHost reports whether host (host[:port] of the request) is localhost, an IP address, or
// one of hosts.
func knownHost(host string, hosts []string) bool {
	if slices.ContainsFunc(hosts, func(h string) bool { return strings.EqualFold(h, host) }) {
		return true
	}
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.TrimSuffix(strings.TrimPrefix(name, "["), "]")
	if strings.EqualFold(name, "localhost") {
		return true
	}
	_, err := netip.ParseAddr(name)
	return err == nil
}
