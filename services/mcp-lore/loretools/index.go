package loretools

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/mapping"
	"github.com/blevesearch/bleve/v2/search/query"
)

// Fact is a curated lore fact (a LoreFact vertex).
type Fact struct {
	ID        string   `json:"id" jsonschema:"lore fact id (lore:…)"`
	Title     string   `json:"title"`
	Text      string   `json:"text"`
	Tags      []string `json:"tags"`
	Canonical bool     `json:"canonical" jsonschema:"true if the fact is canon"`
	About     []string `json:"about" jsonschema:"ids of the entities the fact is about"`
}

// Embedder is the optional embedding-provider hook. When set, search blends
// BM25 with cosine similarity between query and fact embeddings. None is wired
// by default.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// Hit is one ranked search result.
type Hit struct {
	Fact
	Score   float64 `json:"score" jsonschema:"relevance, higher is better"`
	Snippet string  `json:"snippet" jsonschema:"the part of the text that matched"`
}

// Index is an in-memory BM25 index over lore facts (bleve, scorch in memory).
// It is replaced wholesale on refresh. Safe for concurrent use.
type Index struct {
	embedder Embedder

	mu      sync.RWMutex
	idx     bleve.Index
	facts   map[string]Fact
	vectors map[string][]float32
	loaded  time.Time
}

// NewIndex returns an empty index.
func NewIndex(e Embedder) *Index { return &Index{embedder: e, facts: map[string]Fact{}} }

func newMapping() mapping.IndexMapping {
	text := bleve.NewTextFieldMapping()
	text.Analyzer = en.AnalyzerName
	text.Store = false
	kw := bleve.NewKeywordFieldMapping()
	kw.Store = false
	boolean := bleve.NewBooleanFieldMapping()
	doc := bleve.NewDocumentMapping()
	doc.AddFieldMappingsAt("title", text)
	doc.AddFieldMappingsAt("text", text)
	doc.AddFieldMappingsAt("tags", kw)
	doc.AddFieldMappingsAt("tagtext", text)
	doc.AddFieldMappingsAt("canonical", boolean)
	m := bleve.NewIndexMapping()
	m.DefaultMapping = doc
	m.ScoringModel = "bm25"
	return m
}

type doc struct {
	Title     string   `json:"title"`
	Text      string   `json:"text"`
	Tags      []string `json:"tags"`
	TagText   string   `json:"tagtext"`
	Canonical bool     `json:"canonical"`
}

// Replace indexes facts, replacing everything indexed before.
func (x *Index) Replace(ctx context.Context, facts []Fact) error {
	idx, err := bleve.NewUsing("", newMapping(), scorch.Name, scorch.Name, nil)
	if err != nil {
		return fmt.Errorf("lore index: %w", err)
	}
	byID := make(map[string]Fact, len(facts))
	b := idx.NewBatch()
	for _, f := range facts {
		if f.ID == "" {
			continue
		}
		tags := make([]string, len(f.Tags))
		for i, t := range f.Tags {
			tags[i] = strings.ToLower(t)
		}
		if err := b.Index(f.ID, doc{Title: f.Title, Text: f.Text, Tags: tags, TagText: strings.Join(f.Tags, " "), Canonical: f.Canonical}); err != nil {
			_ = idx.Close()
			return err
		}
		byID[f.ID] = f
	}
	if err := idx.Batch(b); err != nil {
		_ = idx.Close()
		return err
	}
	var vecs map[string][]float32
	if x.embedder != nil && len(byID) > 0 {
		ids := make([]string, 0, len(byID))
		texts := make([]string, 0, len(byID))
		for id, f := range byID {
			ids = append(ids, id)
			texts = append(texts, f.Title+"\n"+f.Text)
		}
		embs, err := x.embedder.Embed(ctx, texts)
		if err != nil || len(embs) != len(ids) {
			_ = idx.Close()
			return fmt.Errorf("lore index: embedding facts: %v", errors.Join(err, errors.New("count mismatch")))
		}
		vecs = make(map[string][]float32, len(ids))
		for i, id := range ids {
			vecs[id] = embs[i]
		}
	}
	x.mu.Lock()
	old := x.idx
	x.idx, x.facts, x.vectors, x.loaded = idx, byID, vecs, time.Now()
	x.mu.Unlock()
	if old != nil {
		_ = old.Close()
	}
	return nil
}

// Len returns the number of indexed facts.
func (x *Index) Len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.facts)
}

// IDs returns up to limit fact ids, sorted.
func (x *Index) IDs(limit int) []string {
	x.mu.RLock()
	ids := make([]string, 0, len(x.facts))
	for id := range x.facts {
		ids = append(ids, id)
	}
	x.mu.RUnlock()
	slices.Sort(ids)
	if len(ids) > limit {
		ids = ids[:limit]
	}
	return ids
}

// Loaded returns when the index was last replaced (zero if never).
func (x *Index) Loaded() time.Time {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.loaded
}

// Get returns a fact by id.
func (x *Index) Get(id string) (Fact, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	f, ok := x.facts[id]
	return f, ok
}

// ByTitle returns facts whose title equals title (case-insensitive),
// canonical first.
func (x *Index) ByTitle(title string) []Fact {
	x.mu.RLock()
	defer x.mu.RUnlock()
	var out []Fact
	for _, f := range x.facts {
		if strings.EqualFold(strings.TrimSpace(f.Title), strings.TrimSpace(title)) {
			out = append(out, f)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Canonical != out[j].Canonical {
			return out[i].Canonical
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// SearchOptions narrow a search.
type SearchOptions struct {
	K             int
	Tags          []string // all must be present
	CanonicalOnly bool
}

// Search ranks facts for q: BM25 over title (boost 2), text and tags, with
// fuzzy matching as a weak fallback; blended with embeddings when an Embedder
// is set.
func (x *Index) Search(ctx context.Context, q string, o SearchOptions) ([]Hit, error) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.idx == nil {
		return []Hit{}, nil
	}
	var should []query.Query
	for _, f := range []struct {
		field string
		boost float64
	}{{"title", 2}, {"text", 1}, {"tagtext", 1.5}} {
		m := bleve.NewMatchQuery(q)
		m.SetField(f.field)
		m.SetBoost(f.boost)
		should = append(should, m)
	}
	fz := bleve.NewMatchQuery(q)
	fz.SetField("text")
	fz.SetFuzziness(1)
	fz.SetBoost(0.2)
	should = append(should, fz)
	var qq query.Query = bleve.NewDisjunctionQuery(should...)
	var must []query.Query
	for _, t := range o.Tags {
		tq := bleve.NewTermQuery(strings.ToLower(t))
		tq.SetField("tags")
		must = append(must, tq)
	}
	if o.CanonicalOnly {
		bq := bleve.NewBoolFieldQuery(true)
		bq.SetField("canonical")
		must = append(must, bq)
	}
	if len(must) > 0 {
		qq = bleve.NewConjunctionQuery(append([]query.Query{qq}, must...)...)
	}
	size := o.K
	if x.vectors != nil {
		size = max(o.K*5, 50) // rerank a wider pool
	}
	req := bleve.NewSearchRequestOptions(qq, size, 0, false)
	res, err := x.idx.SearchInContext(ctx, req)
	if err != nil {
		return nil, err
	}
	hits := make([]Hit, 0, len(res.Hits))
	for _, h := range res.Hits {
		f, ok := x.facts[h.ID]
		if !ok {
			continue
		}
		hits = append(hits, Hit{Fact: f, Score: h.Score, Snippet: snippet(f.Text, q)})
	}
	if x.vectors != nil && len(hits) > 0 {
		embs, err := x.embedder.Embed(ctx, []string{q})
		if err == nil && len(embs) == 1 {
			top := hits[0].Score
			for i := range hits {
				cos := cosine(embs[0], x.vectors[hits[i].ID])
				hits[i].Score = 0.5*hits[i].Score/top + 0.5*cos
			}
			sort.SliceStable(hits, func(i, j int) bool { return hits[i].Score > hits[j].Score })
		}
	}
	if len(hits) > o.K {
		hits = hits[:o.K]
	}
	for i := range hits {
		hits[i].Score = math.Round(hits[i].Score*10000) / 10000
	}
	return hits, nil
}

func cosine(a, b []float32) float64 {
	if len(a) == 0 || len(a) != len(b) {
		return 0
	}
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return dot / math.Sqrt(na*nb)
}

// snippet returns up to ~200 characters of text around the first query word found.
func snippet(text, q string) string {
	const width = 200
	if len(text) <= width {
		return text
	}
	lower := strings.ToLower(text)
	pos := -1
	for _, w := range strings.Fields(strings.ToLower(q)) {
		if len(w) < 3 {
			continue
		}
		if p := strings.Index(lower, w); p >= 0 && (pos < 0 || p < pos) {
			pos = p
		}
	}
	start := max(0, pos-width/3)
	end := min(len(text), start+width)
	// keep UTF-8 boundaries
	for start > 0 && !utf8Start(text[start]) {
		start--
	}
	for end < len(text) && !utf8Start(text[end]) {
		end++
	}
	s := text[start:end]
	if start > 0 {
		s = "…" + s
	}
	if end < len(text) {
		s += "…"
	}
	return s
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }
