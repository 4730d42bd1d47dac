package budget

import (
	"math"
	"time"
)

// Window is a budget's period. Windows are fixed and aligned in UTC: a day starts at
// midnight UTC, a month on its first day.
type Window string

// Windows.
const (
	Minute Window = "minute"
	Hour   Window = "hour"
	Day    Window = "day"
	Month  Window = "month"
)

var windows = map[Window]time.Duration{Minute: time.Minute, Hour: time.Hour, Day: 24 * time.Hour, Month: 31 * 24 * time.Hour}

// Start returns when the window containing now began, and when it ends.
func (w Window) Start(now time.Time) (start, end time.Time) {
	now = now.UTC()
	switch w {
	case Month:
		start = time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
		return start, start.AddDate(0, 1, 0)
	case Day:
		start = time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
		return start, start.AddDate(0, 0, 1)
	}
	d := windows[w]
	if d == 0 {
		d = time.Minute
	}
	start = now.Truncate(d)
	return start, start.Add(d)
}

// Usage is what a window holds: settled spend plus outstanding reservations, in micro-USD
// (so that sums are exact integers) and tokens.
type Usage struct {
	Micros int64 `json:"micros"`
	Tokens int64 `json:"tokens"`
}

// Add returns u + o.
func (u Usage) Add(o Usage) Usage {
	return Usage{Micros: u.Micros + o.Micros, Tokens: u.Tokens + o.Tokens}
}

// Limit is a window's limit; a zero field does not limit.
type Limit struct {
	Micros int64 `json:"micros"`
	Tokens int64 `json:"tokens"`
}

// Micros converts USD to micro-USD, rounding up so that a reservation is never smaller than
// the estimate it stands for.
func Micros(usd float64) int64 {
	if !(usd > 0) {
		return 0
	}
	return int64(math.Ceil(usd*1e6 - 1e-9))
}

// USD converts micro-USD back.
func USD(m int64) float64 { return float64(m) / 1e6 }

// Verdict is the outcome of a reservation.
type Verdict int

// Verdicts.
const (
	Admitted Verdict = iota
	// RefusedLimit: the estimate does not fit the window's limit.
	RefusedLimit
	// RefusedLow: the estimate fits the limit but not the degrade threshold, and a cheaper
	// tier could serve the call.
	RefusedLow
	// RefusedPaused: the budget is paused (the kill switch).
	RefusedPaused
)

func (v Verdict) String() string {
	switch v {
	case Admitted:
		return "admitted"
	case RefusedLimit:
		return "spent"
	case RefusedLow:
		return "low"
	case RefusedPaused:
		return "paused"
	}
	return "unknown"
}

// Reserve is the budget rule: whether a call estimated at est fits a window holding u under
// limit l, and the usage after it. degradeAt (0 or 1: none) is the share of the limit above
// which a degradable call is refused so that it moves to a cheaper tier.
func Reserve(u, est Usage, l Limit, degradeAt float64, degradable bool) (Usage, Verdict) {
	next := u.Add(est)
	if over(next, l, 1) {
		return u, RefusedLimit
	}
	if degradable && degradeAt > 0 && degradeAt < 1 && over(next, l, degradeAt) {
		return u, RefusedLow
	}
	return next, Admitted
}

func over(u Usage, l Limit, share float64) bool {
	if l.Micros > 0 && float64(u.Micros) > share*float64(l.Micros) {
		return true
	}
	return l.Tokens > 0 && float64(u.Tokens) > share*float64(l.Tokens)
}

// Settle replaces a reservation of est by the actual usage (never below zero).
func Settle(u, est, actual Usage) Usage {
	return Usage{Micros: max(u.Micros-est.Micros+actual.Micros, 0), Tokens: max(u.Tokens-est.Tokens+actual.Tokens, 0)}
}

// Release gives a reservation of est back.
func Release(u, est Usage) Usage { return Settle(u, est, Usage{}) }

// Effective is the limit that applies: the configured one, replaced by an operator's
// override, scaled by an actor's multiplier (a repeat offender's tighter window; 1 or 0:
// unchanged).
func Effective(l Limit, o *Override, multiplier float64) Limit {
	if o != nil {
		if o.USD != nil {
			l.Micros = Micros(*o.USD)
		}
		if o.Tokens != nil {
			l.Tokens = *o.Tokens
		}
	}
	if multiplier > 0 && multiplier != 1 {
		// A limit scaled to zero would mean "unlimited": keep at least one unit.
		if l.Micros > 0 {
			l.Micros = max(int64(float64(l.Micros)*multiplier), 1)
		}
		if l.Tokens > 0 {
			l.Tokens = max(int64(float64(l.Tokens)*multiplier), 1)
		}
	}
	return l
}

// Ratio is the share of the limit a window uses (the larger of USD and tokens; 0 without a
// limit).
func Ratio(u Usage, l Limit) float64 {
	r := 0.0
	if l.Micros > 0 {
		r = float64(u.Micros) / float64(l.Micros)
	}
	if l.Tokens > 0 {
		r = max(r, float64(u.Tokens)/float64(l.Tokens))
	}
	return r
}
