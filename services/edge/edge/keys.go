package edge

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"golang.org/x/time/rate"

	"github.com/worldgate/worldgate/events"
)

// Scopes a key may hold.
const (
	ScopePublish  = "publish"  // POST /v1/events
	ScopeReadAll  = "read:all" // outcomes of every player
	scopeReadPrfx = "read:"    // read:<actor id>: outcomes of that actor only (e.g. read:player:ada)
)

// Key is one client's API key: who it is, what it may do and how fast.
type Key struct {
	// Name identifies the client in logs and metrics; never the secret.
	Name string `json:"name"`
	// SHA256 is the hex SHA-256 of the secret the client sends (Authorization: Bearer
	// <secret>); keys files store only this. Secret is accepted instead for development.
	SHA256 string `json:"sha256,omitempty"`
	Secret string `json:"secret,omitempty"`
	// Scopes: "publish", "read:all", or "read:<actor id>" once per actor it may read.
	Scopes []string `json:"scopes"`
	// Players, when set, are the only players the key acts for (actor ids, e.g. player:ana):
	// it publishes only envelopes whose actor, and the player their payload names, is one of
	// them, and reads only their outcomes (read:all is refused). A key a browser page holds —
	// the /play console's — is such a key: PlayerKey makes one.
	Players []string `json:"players,omitempty"`
	// Rate is the requests per second allowed (default 20), Burst the bucket (default 2×Rate).
	Rate  float64 `json:"rate,omitempty"`
	Burst int     `json:"burst,omitempty"`
}

// key is a loaded Key.
type key struct {
	Key
	digest  [32]byte
	limiter *rate.Limiter
}

func (k *key) may(scope string) bool { return slices.Contains(k.Scopes, scope) }

// readsAll reports whether the key may read every actor's outcomes.
func (k *key) readsAll() bool { return k.may(ScopeReadAll) }

// readable are the actors the key may read (when it may not read all).
func (k *key) readable() []string {
	var out []string
	for _, s := range k.Scopes {
		if strings.HasPrefix(s, scopeReadPrfx) && s != ScopeReadAll {
			out = append(out, strings.TrimPrefix(s, scopeReadPrfx))
		}
	}
	return out
}

func (k *key) mayRead() bool { return k.readsAll() || len(k.readable()) > 0 }

// PlayerKey is a key that acts only for players: it may publish their events and read their
// outcomes, nothing else (the /play console's key).
func PlayerKey(name, secret string, players ...string) Key {
	k := Key{Name: name, Secret: secret, Scopes: []string{ScopePublish}, Players: players}
	for _, p := range players {
		k.Scopes = append(k.Scopes, scopeReadPrfx+p)
	}
	return k
}

// actsFor reports whether the key may act for actor: any actor, unless the key names players.
func (k *key) actsFor(actor string) bool {
	return len(k.Players) == 0 || slices.Contains(k.Players, actor)
}

// mayPublish says why the key may not publish env ("" when it may): a key that names players
// publishes only as one of them, and only events about one of them.
func (k *key) mayPublish(env *events.Envelope) string {
	if len(k.Players) == 0 {
		return ""
	}
	players := strings.Join(k.Players, ", ")
	if !k.actsFor(env.Actor.ID) {
		return fmt.Sprintf("key %q acts only for %s: it may not publish as %s", k.Name, players, env.Actor.ID)
	}
	if p := events.PlayerOf(env); p != "" && !k.actsFor(p) {
		return fmt.Sprintf("key %q acts only for %s: it may not publish an event about %s", k.Name, players, p)
	}
	return ""
}

// Keyring holds the loaded keys.
type Keyring struct{ keys []*key }

// NewKeyring checks and loads keys.
func NewKeyring(keys []Key) (*Keyring, error) {
	r := &Keyring{}
	names := map[string]bool{}
	for i, k := range keys {
		if k.Name == "" {
			return nil, fmt.Errorf("key %d: name is missing", i)
		}
		if names[k.Name] {
			return nil, fmt.Errorf("key %q is listed twice", k.Name)
		}
		names[k.Name] = true
		lk := &key{Key: k}
		switch {
		case k.SHA256 != "" && k.Secret != "":
			return nil, fmt.Errorf("key %q: give sha256 or secret, not both", k.Name)
		case k.SHA256 != "":
			b, err := hex.DecodeString(k.SHA256)
			if err != nil || len(b) != 32 {
				return nil, fmt.Errorf("key %q: sha256 must be 64 hex digits", k.Name)
			}
			copy(lk.digest[:], b)
		case len(k.Secret) >= 16:
			lk.digest = sha256.Sum256([]byte(k.Secret))
		default:
			return nil, fmt.Errorf("key %q: a secret of at least 16 characters (or its sha256) is required", k.Name)
		}
		if len(k.Scopes) == 0 {
			return nil, fmt.Errorf("key %q has no scopes: give publish, read:all or read:<actor id>", k.Name)
		}
		for _, s := range k.Scopes {
			if s != ScopePublish && !(strings.HasPrefix(s, scopeReadPrfx) && len(s) > len(scopeReadPrfx)) {
				return nil, fmt.Errorf("key %q: unknown scope %q: use publish, read:all or read:<actor id>", k.Name, s)
			}
		}
		for _, p := range k.Players {
			if strings.TrimSpace(p) == "" || len(p) > 128 {
				return nil, fmt.Errorf("key %q: players must be actor ids of 1 to 128 characters, e.g. player:ana", k.Name)
			}
		}
		for _, s := range k.Scopes {
			if len(k.Players) > 0 && strings.HasPrefix(s, scopeReadPrfx) && !slices.Contains(k.Players, strings.TrimPrefix(s, scopeReadPrfx)) {
				return nil, fmt.Errorf("key %q acts only for %s: scope %s is refused; give read:<player> for its players", k.Name, strings.Join(k.Players, ", "), s)
			}
		}
		if k.Rate < 0 || k.Burst < 0 {
			return nil, fmt.Errorf("key %q: rate and burst must not be negative", k.Name)
		}
		r1 := k.Rate
		if r1 == 0 {
			r1 = 20
		}
		b := k.Burst
		if b == 0 {
			b = max(int(2*r1), 1)
		}
		lk.limiter = rate.NewLimiter(rate.Limit(r1), b)
		lk.Secret = "" // not kept
		r.keys = append(r.keys, lk)
	}
	return r, nil
}

// LoadKeys reads a JSON keys file: {"keys": [Key, …]}; unknown fields and members named twice
// are refused.
func LoadKeys(path string) ([]Key, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if err := events.CheckJSON("keys file", raw); err != nil {
		return nil, fmt.Errorf("keys file %s: %w", path, err)
	}
	var f struct {
		Keys []Key `json:"keys"`
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("keys file %s: %w", path, err)
	}
	if len(f.Keys) == 0 {
		return nil, errors.New("keys file " + path + " lists no keys")
	}
	return f.Keys, nil
}

// find returns the key whose secret is secret, comparing digests in constant time.
func (r *Keyring) find(secret string) *key {
	d := sha256.Sum256([]byte(secret))
	var found *key
	for _, k := range r.keys {
		if subtle.ConstantTimeCompare(d[:], k.digest[:]) == 1 {
			found = k
		}
	}
	return found
}

// HashSecret is the value of a Key's sha256 field for secret.
func HashSecret(secret string) string {
	d := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(d[:])
}
