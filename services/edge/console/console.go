// Package console is the /play console: a plain HTML and JavaScript page, embedded in the binary
// (no build step), through which a person walks the world, talks to its NPCs and asks for
// quests, using only edge's public API (POST /v1/events, GET /v1/outcomes) — what a game
// client would. Every text from the world or the AI is rendered with textContent, never as
// HTML. A side panel shows each event's journey: the gates passed or the refusing gate and its
// reason, reprompts, fallback, tokens and cost.
package console

import (
	"context"
	"embed"
	"encoding/json"
	"io/fs"
	"net/http"
	"regexp"
)

//go:embed static
var static embed.FS

// Config configures the console.
type Config struct {
	// Key is the API key the page uses (worldgate dev's dev key).
	Key string
	// Player is the player the page plays as; Start says where that player is now.
	Player string
	Start  func(ctx context.Context) (string, error)
	// Location reads a location (name, description, exits, occupants) for the page.
	Location func(ctx context.Context, id string) (any, error)
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
			start, err := cfg.Start(r.Context())
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Cache-Control", "no-store")
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
