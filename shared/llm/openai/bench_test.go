package openai_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/worldgate/worldgate/shared/llm"
)

func benchServer(b *testing.B) *httptest.Server {
	body := []byte(completion("gpt-4o-mini", `{"text":"Quiet.","mood":"calm"}`, "", "stop", 300, 20, 100))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	b.Cleanup(srv.Close)
	return srv
}

// BenchmarkRawHTTP is the floor: one POST of a similar body to the same
// local upstream, reading the answer, with no SDK and no registry.
func BenchmarkRawHTTP(b *testing.B) {
	srv := benchServer(b)
	payload := []byte(`{"model":"gpt-4o-mini","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Describe the tavern at loc-1."}],"response_format":{"type":"json_schema","json_schema":{"name":"ambience","schema":{}}}}`)
	c := &http.Client{}
	b.ReportAllocs()
	for b.Loop() {
		resp, err := c.Post(srv.URL+"/v1/chat/completions", "application/json", bytes.NewReader(payload))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// BenchmarkAdapter is the OpenAI adapter alone (SDK included).
func BenchmarkAdapter(b *testing.B) {
	srv := benchServer(b)
	u := &upstream{srv: srv}
	p := u.provider(&testing.T{}, "oa")
	req := userReq("Describe the tavern at loc-1.")
	req.Model = "gpt-4o-mini"
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Complete(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRegistry is the full provider layer per call: routing, retry
// wrapper, per-attempt timeout, pricing, metrics, schema validation, and
// the adapter.
func BenchmarkRegistry(b *testing.B) {
	srv := benchServer(b)
	u := &upstream{srv: srv}
	t := &testing.T{}
	r := registry(t, nil, []string{"oa:gpt-4o-mini"}, u.provider(t, "oa"))
	req := userReq("Describe the tavern at loc-1.")
	req.Output = &llm.OutputSchema{Name: "ambience", Schema: []byte(moodSchema)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Complete(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
}
