package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth/extauth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/worldgate/worldgate/shared/slowtest"
)

// runDemoOnly runs `worldgate dev --demo-only --json` in-process on free ports and returns
// the summary it prints as its last line.
func runDemoOnly(t *testing.T, dir string) Summary {
	t.Helper()
	var stdout, stderr bytes.Buffer
	args := []string{"-data-dir", dir, "-demo-only", "-json", "-nats-port", "0", "-graph-port", "0", "-admin-port", "0", "-mcp-port", "0", "-edge-port", "0"}
	if err := runDev(context.Background(), args, &stdout, &stderr); err != nil {
		t.Fatalf("dev: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var s Summary
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &s); err != nil {
		t.Fatalf("last line is not the JSON summary: %v\n%s", err, stdout.String())
	}
	return s
}

func TestDevDemoOnlyPrintsSummaryAndEndpoints(t *testing.T) {
	slowtest.Skip(t, "end-to-end (worldgate dev --demo-only: the whole demo)")
	dir := t.TempDir()
	s := runDemoOnly(t, dir)
	for _, kind := range []string{"ambience", "npc_dialogue", "quest_seed", "player_moved"} {
		if s.ProposalsByKind[kind] == 0 {
			t.Errorf("the demo produced no %s proposal: %+v", kind, s)
		}
	}
	if s.Events < 20 || s.Committed == 0 || s.Tokens == 0 || s.CostUSD <= 0 || s.CacheHits == 0 || s.DeadLetters != 0 {
		t.Errorf("summary %+v: want events, commits, tokens, cost and cache hits, and no dead letters", s)
	}
	// The scenario is written so that three gates refuse something on every run: an NPC that
	// does not exist (invariant), repeated requests (dedup) and one player spamming an NPC
	// (rate); and the input rail refuses a hostile player's words before any model reads them
	// (before the input rail, the model quoted them back and the safety gate refused the line).
	for _, gate := range []string{"invariant", "dedup", "rate"} {
		if s.Rejected[gate] == 0 {
			t.Errorf("no rejection from the %s gate: %+v", gate, s.Rejected)
		}
	}
	if s.InputRailBlocked == 0 {
		t.Errorf("the input rail blocked nothing: %+v", s)
	}
	// Every request ends in a final outcome on stream OUTCOMES: content committed, and the
	// scenario's move west from the ash gate (there is no exit) refused by world-rules.
	if s.Outcomes["committed"] == 0 || s.Outcomes["refused"] == 0 {
		t.Errorf("outcomes %v: want committed and refused outcomes", s.Outcomes)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "endpoints.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ep map[string]any
	if err := json.Unmarshal(raw, &ep); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"nats.url", "graph.url", "metrics.url"} {
		if ep[k] == nil {
			t.Errorf("endpoints.json lacks %s: %s", k, raw)
		}
	}
	// A second run on the same data directory counts only its own events.
	if again := runDemoOnly(t, dir); again.Events != s.Events || again.Committed == 0 {
		t.Fatalf("second run counted %d events, first %d", again.Events, s.Events)
	}
}

// worldgate dev prints where things listen but never a credential (they are in
// endpoints.json, 0600); its data directory is 0700 and its files 0600.
func TestDevKeepsItsSecrets(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	var stdout, stderr bytes.Buffer
	args := []string{"-data-dir", dir, "-no-demo", "-demo-only", "-nats-port", "0", "-graph-port", "0", "-admin-port", "0", "-mcp-port", "0", "-edge-port", "0"}
	if err := runDev(context.Background(), args, &stdout, &stderr); err != nil {
		t.Fatalf("dev: %v\n%s", err, stderr.String())
	}
	raw, err := os.ReadFile(filepath.Join(dir, "endpoints.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ep map[string]any
	if err := json.Unmarshal(raw, &ep); err != nil {
		t.Fatal(err)
	}
	var secrets []string
	for k, v := range ep {
		switch v := v.(type) {
		case map[string]any:
			if p, _ := v["password"].(string); p != "" {
				secrets = append(secrets, p)
			}
		case string:
			if strings.Contains(k, "token") || strings.HasSuffix(k, ".key") {
				secrets = append(secrets, v)
			}
		}
	}
	if len(secrets) < 3 {
		t.Fatalf("endpoints.json names %d credentials: %s", len(secrets), raw)
	}
	printed := stdout.String() + stderr.String()
	for _, s := range secrets {
		if strings.Contains(printed, s) {
			t.Errorf("a credential from endpoints.json (%q…) was printed:\n%s", s, printed)
		}
	}
	if !strings.Contains(printed, "nats.url") {
		t.Errorf("the endpoints were not printed:\n%s", printed)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("data directory mode %v (%v), want 0700", fi.Mode().Perm(), err)
	}
	for _, f := range []string{"endpoints.json", "worldgate.log", "nats-users.json", "mcp-jwt.secret", "keys/approval.key"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s mode %v (%v): others may read it", f, fi.Mode().Perm(), err)
		}
	}
}

// TestDevMCPAuthorizationFlow: against `worldgate dev`, an outside client (the official go-sdk
// client with its client_credentials handler and the dev client of endpoints.json) is refused
// without a token, discovers the dev issuer from the server's protected-resource metadata,
// gets a token and calls a tool; an Origin from elsewhere is refused.
func TestDevMCPAuthorizationFlow(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var stdout, stderr bytes.Buffer
	go func() {
		done <- runDev(ctx, []string{"-data-dir", dir, "-no-demo", "-nats-port", "0", "-graph-port", "0", "-admin-port", "0", "-mcp-port", "0", "-edge-port", "0"}, &stdout, &stderr)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("dev: %v", err)
		}
	}()
	var ep map[string]any
	deadline := time.Now().Add(60 * time.Second)
	for {
		raw, err := os.ReadFile(filepath.Join(dir, "endpoints.json"))
		if err == nil && json.Unmarshal(raw, &ep) == nil && ep["mcp.issuer"] != nil {
			break
		}
		select {
		case err := <-done:
			done <- err // for the deferred wait, which would otherwise block forever
			t.Fatalf("dev ended: %v\n%s", err, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no MCP endpoints in endpoints.json after 60s: %s", raw)
		}
		time.Sleep(100 * time.Millisecond)
	}
	worldURL := ep["mcp.world.url"].(string)

	req, _ := http.NewRequest(http.MethodPost, worldURL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	req.Header.Set("Origin", "http://evil.example")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("Origin http://evil.example: %d, want 403", resp.StatusCode)
	}

	h, err := extauth.NewClientCredentialsHandler(&extauth.ClientCredentialsHandlerConfig{Credentials: &oauthex.ClientCredentials{
		ClientID: ep["mcp.client.id"].(string), ClientSecretAuth: &oauthex.ClientSecretAuth{ClientSecret: ep["mcp.client.secret"].(string)}}})
	if err != nil {
		t.Fatal(err)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "outside-client", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: worldURL, OAuthHandler: h, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatalf("connect with discovery: %v", err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get-location", Arguments: map[string]any{"locationId": "loc:forge-row"}})
	if err != nil || res.IsError {
		t.Fatalf("get-location: %v %+v", err, res.GetError())
	}
}

// worldgate dev's start-up lines name where everything listens and print no credential, the
// approvers' passwords included (issue 40: the terminal printed one while saying credentials
// were in endpoints.json).
func TestDevPrintsNoCredential(t *testing.T) {
	st := startQuietStack(t)
	var secrets []string
	var walk func(key string, v any)
	walk = func(key string, v any) {
		switch v := v.(type) {
		case string:
			if secretEndpoint(key, v) && len(v) >= 8 {
				secrets = append(secrets, v)
			}
		case map[string]string:
			for k, e := range v {
				walk(k, e)
			}
		case map[string]any:
			for k, e := range v {
				walk(k, e)
			}
		}
	}
	for k, v := range st.Endpoints {
		walk(k, v)
	}
	if len(secrets) < 3 {
		t.Fatalf("found %d credentials in endpoints.json; the walk misses them", len(secrets))
	}
	var out strings.Builder
	printEndpoints(func(format string, a ...any) { fmt.Fprintf(&out, format+"\n", a...) }, st.Endpoints)
	for _, s := range secrets {
		if strings.Contains(out.String(), s) {
			t.Errorf("the start-up lines print a credential:\n%s", out.String())
			break
		}
	}
	if !strings.Contains(out.String(), st.EdgeURL) {
		t.Errorf("the start-up lines do not name edge's URL:\n%s", out.String())
	}
}
