package mcpx

import (
	"math"
	"sync"
	"time"
)

// RateLimit is a per-caller token bucket: Burst calls at once, refilled at
// PerSecond. A zero PerSecond disables limiting.
type RateLimit struct {
	PerSecond float64
	Burst     int
}

// RateLimiter keeps one token bucket per key (the token's subject).
type RateLimiter struct {
	cfg RateLimit
	now func() time.Time

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

// NewRateLimiter returns a limiter; nil if cfg disables limiting.
func NewRateLimiter(cfg RateLimit) *RateLimiter {
	if cfg.PerSecond <= 0 {
		return nil
	}
	if cfg.Burst < 1 {
		cfg.Burst = int(math.Max(1, math.Ceil(cfg.PerSecond)))
	}
	return &RateLimiter{cfg: cfg, now: time.Now, buckets: map[string]*bucket{}}
}

// Allow takes one token for key. If none is left it returns false and how long
// until one will be.
func (l *RateLimiter) Allow(key string) (bool, time.Duration) {
	if l == nil {
		return true, 0
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[key]
	if !ok {
		if len(l.buckets) > 10000 { // bound memory: drop full buckets
			for k, v := range l.buckets {
				if v.tokens+now.Sub(v.last).Seconds()*l.cfg.PerSecond >= float64(l.cfg.Burst) {
					delete(l.buckets, k)
				}
			}
		}
		b = &bucket{tokens: float64(l.cfg.Burst), last: now}
		l.buckets[key] = b
	}
	b.tokens = math.Min(float64(l.cfg.Burst), b.tokens+now.Sub(b.last).Seconds()*l.cfg.PerSecond)
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	wait := time.Duration((1 - b.tokens) / l.cfg.PerSecond * float64(time.Second))
	return false, wait
}
