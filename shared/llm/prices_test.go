package llm_test

import (
	"math"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/worldgate/worldgate/shared/llm"
)

func TestEmbeddedPricesParse(t *testing.T) {
	p := llm.DefaultPrices()
	for _, m := range []string{"scripted-small", "scripted-large", "gpt-4o-mini", "claude-haiku-4-5"} {
		if _, ok := p.Lookup("", m); !ok {
			t.Errorf("embedded table lacks %s", m)
		}
	}
	if c, ok := p.Cost("scripted", "scripted-small", llm.Usage{PromptTokens: 1000, CompletionTokens: 100}); !ok || c <= 0 {
		t.Errorf("scripted models must have a small non-zero price: %v %v", c, ok)
	}
	if c, ok := p.Cost("ollama", "llama3.2", llm.Usage{PromptTokens: 1000}); !ok || c != 0 {
		t.Errorf("ollama:* should price local models at 0 and known: %v %v", c, ok)
	}
	if _, ok := p.Cost("openai", "no-such-model", llm.Usage{PromptTokens: 1}); ok {
		t.Error("unknown model reported as priced")
	}
}

func TestCachedTokensPricedSeparately(t *testing.T) {
	cached := 0.5
	pr := llm.Price{Input: 2, Output: 8, CachedInput: &cached}
	got := pr.Cost(llm.Usage{PromptTokens: 1_000_000, CachedPromptTokens: 250_000, CompletionTokens: 500_000})
	want := 0.75*2 + 0.25*0.5 + 0.5*8
	if math.Abs(got-want) > 1e-9 {
		t.Fatalf("cost = %v, want %v", got, want)
	}
	noCached := llm.Price{Input: 2, Output: 8}
	if got := noCached.Cost(llm.Usage{PromptTokens: 1_000_000, CachedPromptTokens: 1_000_000}); got != 2 {
		t.Fatalf("without a cached rate, cached tokens cost the input rate: %v", got)
	}
}

func TestPricesOverrideFromFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "prices.yaml")
	if err := os.WriteFile(path, []byte("models:\n  gpt-4o-mini: {input: 1, output: 1}\n  my-model: {input: 3, output: 4}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := llm.LoadPrices(path)
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := p.Cost("", "gpt-4o-mini", llm.Usage{PromptTokens: 1e6}); c != 1 {
		t.Errorf("override not applied: %v", c)
	}
	if _, ok := p.Lookup("", "scripted-small"); !ok {
		t.Error("override dropped embedded entries")
	}
	if _, err := llm.ParsePrices([]byte("models:\n  x: {input: -1, output: 1}\n")); err == nil {
		t.Error("negative price accepted")
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	h := http.Header{}
	h.Set("Retry-After", "2")
	if d := llm.ParseRetryAfter(h, now); d != 2*time.Second {
		t.Errorf("seconds: %v", d)
	}
	h.Set("Retry-After-Ms", "1500")
	if d := llm.ParseRetryAfter(h, now); d != 1500*time.Millisecond {
		t.Errorf("ms: %v", d)
	}
	h = http.Header{}
	h.Set("Retry-After", now.Add(5*time.Second).Format(http.TimeFormat))
	if d := llm.ParseRetryAfter(h, now); d != 5*time.Second {
		t.Errorf("date: %v", d)
	}
	h.Set("Retry-After", "soon")
	if d := llm.ParseRetryAfter(h, now); d != 0 {
		t.Errorf("garbage: %v", d)
	}
}

func TestExtractJSON(t *testing.T) {
	for in, want := range map[string]string{
		"```json\n{\"a\":1}\n```":     `{"a":1}`,
		"Here you go: {\"a\":1} done": `{"a":1}`,
		" [1,2] ":                     `[1,2]`,
		"no json":                     "no json",
	} {
		if got := llm.ExtractJSON(in); got != want {
			t.Errorf("ExtractJSON(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCostSplitsCacheReadsAndWrites(t *testing.T) {
	read, write := 0.1, 1.25
	p := llm.Price{Input: 1, Output: 5, CachedInput: &read, CacheWrite: &write}
	for _, c := range []struct {
		name string
		u    llm.Usage
		want float64
	}{
		{"plain", llm.Usage{PromptTokens: 1000, CompletionTokens: 100}, (1000*1 + 100*5) / 1e6},
		{"reads and writes", llm.Usage{PromptTokens: 3100, CachedPromptTokens: 2000, CacheWriteTokens: 1000, CompletionTokens: 50}, (100*1 + 2000*0.1 + 1000*1.25 + 50*5) / 1e6},
		{"writes beyond the prompt are clamped", llm.Usage{PromptTokens: 100, CacheWriteTokens: 500}, 100 * 1.25 / 1e6},
		{"negative counts are zero", llm.Usage{PromptTokens: -5, CacheWriteTokens: -3, CompletionTokens: 10}, 10 * 5 / 1e6},
	} {
		if got := p.Cost(c.u); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%s: cost %.10f, want %.10f", c.name, got, c.want)
		}
	}
	noWrite := llm.Price{Input: 2, Output: 0}
	if got := noWrite.Cost(llm.Usage{PromptTokens: 10, CacheWriteTokens: 10}); math.Abs(got-20/1e6) > 1e-12 {
		t.Errorf("cache writes default to the input price: %v", got)
	}
	if _, err := llm.ParsePrices([]byte("models:\n  m: {input: 1, output: 1, cache_write: -1}\n")); err == nil {
		t.Error("a negative cache_write price was accepted")
	}
}
