package mcpx

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// RateLimit is a per-client token bucket: Burst calls at once, refilled at
// PerSecond. A zero PerSecond disables limiting.
type RateLimit struct {
	PerSecond float64
	Burst     int
}

// RateLimiter keeps one golang.org/x/time/rate limiter per client (the
// token's issuer and subject; "local" on stdio). Two programs that share a
// token share its bucket: give each its own token (subject).
type RateLimiter struct {
	cfg RateLimit

	mu      sync.Mutex
	clients map[string]*clientLimiter
}

type clientLimiter struct {
	lim  *rate.Limiter
	last time.Time
}

// maxClients bounds the limiter's memory: beyond it, clients idle long
// enough to have a full bucket again are forgotten (they lose nothing).
const maxClients = 10000

// NewRateLimiter returns a limiter; nil if cfg disables limiting.
func NewRateLimiter(cfg RateLimit) *RateLimiter {
	if cfg.PerSecond <= 0 {
		return nil
	}
	if cfg.Burst < 1 {
		cfg.Burst = int(math.Max(1, math.Ceil(cfg.PerSecond)))
	}
	return &RateLimiter{cfg: cfg, clients: map[string]*clientLimiter{}}
}

// Allow takes one token for key. If none is left it returns false and how long
// until one will be; the refused call takes nothing from the bucket.
func (l *RateLimiter) Allow(key string) (bool, time.Duration) {
	if l == nil {
		return true, 0
	}
	now := time.Now()
	l.mu.Lock()
	c, ok := l.clients[key]
	if !ok {
		if len(l.clients) >= maxClients {
			full := time.Duration(float64(l.cfg.Burst) / l.cfg.PerSecond * float64(time.Second))
			for k, v := range l.clients {
				if now.Sub(v.last) > full {
					delete(l.clients, k)
				}
			}
		}
		c = &clientLimiter{lim: rate.NewLimiter(rate.Limit(l.cfg.PerSecond), l.cfg.Burst)}
		l.clients[key] = c
	}
	c.last = now
	l.mu.Unlock()
	r := c.lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}
