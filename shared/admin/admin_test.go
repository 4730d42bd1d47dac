package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
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
