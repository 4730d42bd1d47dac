package mcpx

import (
	"context"
	"testing"
	"time"
)

// counting is an Authenticator that accepts the tokens it knows and counts its verifications.
type counting struct {
	known map[string]*Principal
	calls int
}

func (c *counting) Authenticate(_ context.Context, token string) (*Principal, error) {
	c.calls++
	if p, ok := c.known[token]; ok {
		return p.clone(), nil
	}
	return nil, ErrInvalidToken
}

// A token verified once is not verified again while the cache holds it and it has not expired;
// a refused token is verified every time; an expired one is verified again (and so refused by
// the verifier); a caller changing the principal it got changes nothing cached.
func TestVerifiedTokensAreReusedUntilTheyExpire(t *testing.T) {
	now := time.Date(2026, 11, 26, 1, 0, 0, 0, time.UTC)
	c := &counting{known: map[string]*Principal{
		"good":   {Subject: "ai-worker", Scopes: []string{ScopeWorldRead}, Expires: now.Add(time.Hour)},
		"static": {Subject: "ops", Scopes: []string{ScopeLoreRead}},
	}}
	v := newVerifiedTokens()
	v.now = func() time.Time { return now }
	ctx := context.Background()
	auth := func(token string) *Principal {
		t.Helper()
		p, _ := v.authenticate(ctx, c, token)
		return p
	}

	p := auth("good")
	if p == nil || p.Subject != "ai-worker" || c.calls != 1 {
		t.Fatalf("first use: %+v after %d verifications", p, c.calls)
	}
	p.Scopes[0] = "tampered"
	if p = auth("good"); p == nil || p.Scopes[0] != ScopeWorldRead || c.calls != 1 {
		t.Fatalf("second use: %+v after %d verifications, want the cached principal unchanged and no verification", p, c.calls)
	}
	if p = auth("static"); p == nil || c.calls != 2 {
		t.Fatalf("another token: %+v after %d verifications", p, c.calls)
	}
	if p = auth("static"); p == nil || c.calls != 2 {
		t.Fatalf("a token without expiry again: %+v after %d verifications", p, c.calls)
	}
	for i := range 2 {
		if p = auth("forged"); p != nil || c.calls != 3+i {
			t.Fatalf("a refused token: %+v after %d verifications, want a refusal verified every time", p, c.calls)
		}
	}

	// Past the token's expiry (and the clock skew), the cached principal is not used.
	now = now.Add(time.Hour + ClockSkew + time.Second)
	delete(c.known, "good") // the verifier now refuses it, as it would an expired token
	if p = auth("good"); p != nil || c.calls != 5 {
		t.Fatalf("an expired token: %+v after %d verifications, want it verified again and refused", p, c.calls)
	}
}
