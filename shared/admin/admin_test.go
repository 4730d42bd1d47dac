package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/shared/admin"
	"github.com/worldgate/worldgate/shared/logx"
)

func TestReadyzCarriesDetailWithoutDecidingReadiness(t *testing.T) {
	s := admin.New(prometheus.NewRegistry(), logx.Discard())
	s.AddDetail("llm", func(context.Context) any { return []map[string]string{{"target": "a:m", "state": "open"}} })
	get := func() (int, map[string]any) {
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		var body map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatal(err)
		}
		return rec.Code, body
	}
	code, body := get()
	detail, _ := body["detail"].(map[string]any)
	if code != http.StatusOK || detail["llm"] == nil {
		t.Fatalf("an open circuit is detail, not unreadiness: %d %v", code, body)
	}
	s.AddCheck("nats", func(context.Context) error { return errors.New("not connected") })
	code, body = get()
	detail, _ = body["detail"].(map[string]any)
	if code != http.StatusServiceUnavailable || detail["llm"] == nil {
		t.Fatalf("a failing check makes it unready, detail still shown: %d %v", code, body)
	}
}

// Go's profiles are served only when asked for, and then a CPU profile is a real one (gzipped
// protobuf, what go tool pprof reads).
func TestProfilesOnlyWhenAsked(t *testing.T) {
	get := func(s *admin.Server, path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec
	}
	off := admin.New(prometheus.NewRegistry(), logx.Discard())
	if rec := get(off, "/debug/pprof/"); rec.Code != http.StatusNotFound {
		t.Fatalf("profiles served without ServeProfiles: %d", rec.Code)
	}
	on := admin.New(prometheus.NewRegistry(), logx.Discard())
	on.ServeProfiles()
	if rec := get(on, "/debug/pprof/"); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "goroutine") {
		t.Fatalf("index: %d %.200s", rec.Code, rec.Body.String())
	}
	rec := get(on, "/debug/pprof/profile?seconds=1")
	if b := rec.Body.Bytes(); rec.Code != http.StatusOK || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("CPU profile: %d, %d bytes", rec.Code, len(rec.Body.Bytes()))
	}
}
