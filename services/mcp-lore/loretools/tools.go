// Package loretools holds mcp-lore's tools: search-lore (BM25-ranked
// retrieval over curated LoreFact vertices, optionally blended with
// embeddings) and get-canonical-fact. Facts come from the graph through a
// read-only gremlin-go connection (refreshed periodically and on demand)
// and/or are passed in directly.
package loretools

import (
	"context"
	"fmt"
	"github.com/google/jsonschema-go/jsonschema"
	"maps"
	"net/http"
	"strings"
	"sync"
	"time"

	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/worldgate/worldgate/shared/graphx"
	"github.com/worldgate/worldgate/shared/mcpx"
)

// Version of the server.
const Version = "1.0.0"

// Input limits.
const (
	MaxQueryLen = 500
	MaxK        = 10
	DefaultK    = 5
	MaxTags     = 5
	MaxTagLen   = 64
	MaxIDLen    = 128
	MaxTopicLen = 200
)

// Options configure mcp-lore.
type Options struct {
	mcpx.Options
	// Graph, if it has a URL, is where LoreFact vertices are read from (use
	// the graph's read-only user). Alternatively pass GraphConn.
	Graph     graphx.Settings
	GraphConn *graphx.Conn
	// Facts are indexed in addition to (and override by id) the graph's facts.
	Facts []Fact
	// RefreshInterval: the index is reloaded from the graph when a call finds
	// it older than this, and by Run periodically (default 1 minute).
	RefreshInterval time.Duration
	// Embedder is the optional embedding hook (none by default).
	Embedder Embedder
}

// Server is mcp-lore.
type Server struct {
	mcp   *mcp.Server
	opts  Options
	graph *graphx.Conn
	index *Index

	refreshMu sync.Mutex
}

// SearchLoreInput is search-lore's input.
type SearchLoreInput struct {
	Query         string   `json:"query" jsonschema:"what to look for, in plain words (1..500 characters)"`
	K             int      `json:"k,omitempty" jsonschema:"how many facts to return, 1..10 (default 5)"`
	Tags          []string `json:"tags,omitempty" jsonschema:"only facts carrying all these tags (at most 5)"`
	CanonicalOnly bool     `json:"canonicalOnly,omitempty" jsonschema:"only canonical facts"`
}

// SearchLoreOutput is search-lore's output.
type SearchLoreOutput struct {
	Query        string `json:"query"`
	Hits         []Hit  `json:"hits" jsonschema:"best first"`
	IndexedFacts int    `json:"indexedFacts"`
}

// ToolCanonicalFact is get-canonical-fact's name.
const ToolCanonicalFact = "get-canonical-fact"

// CanonicalFactShape says what get-canonical-fact's arguments look like; it is added to every
// refusal of their shape (a bare string, both or neither of factId and topic).
const CanonicalFactShape = `give exactly one of factId (a lore fact's id) or topic (a title or a few words) in a JSON object, e.g. {"topic": "The Sundering"} or {"factId": "lore:sundering"}`

// GetCanonicalFactInput is get-canonical-fact's input.
type GetCanonicalFactInput struct {
	FactID string `json:"factId,omitempty" jsonschema:"the fact's id (lore:…); give this or topic"`
	Topic  string `json:"topic,omitempty" jsonschema:"a title or topic, e.g. 'The Sundering'; give this or factId"`
}

// GetCanonicalFactOutput is get-canonical-fact's output.
type GetCanonicalFactOutput struct {
	Fact      Fact   `json:"fact"`
	MatchedBy string `json:"matchedBy" jsonschema:"id, title or search"`
}

// New builds mcp-lore. It does not touch the graph: facts are loaded on the
// first call (or by Refresh / Run).
func New(o Options) (*Server, error) {
	if o.RefreshInterval <= 0 {
		o.RefreshInterval = time.Minute
	}
	var srv *Server
	o.ArgumentHints = maps.Clone(o.ArgumentHints)
	if o.ArgumentHints == nil {
		o.ArgumentHints = map[string]string{}
	}
	o.ArgumentHints[ToolCanonicalFact] = CanonicalFactShape
	o.Completion = func(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
		return mcpx.EntityCompletion(srv.loreKind())(ctx, req)
	}
	s, err := mcpx.NewServer("lore", Version,
		"Read-only lore retrieval over curated facts: search-lore ranks facts for a query; get-canonical-fact returns one canonical fact by id or topic.", o.Options)
	if err != nil {
		return nil, err
	}
	srv = &Server{mcp: s, opts: o, graph: o.GraphConn, index: NewIndex(o.Embedder)}
	if srv.graph == nil && o.Graph.URL != "" {
		o.Graph.ReadOnly = true
		if srv.graph, err = graphx.Open(o.Graph); err != nil {
			return nil, err
		}
	}
	mcp.AddTool(s, &mcp.Tool{
		Name:        "search-lore",
		Description: "Search the curated lore facts. Returns up to k (≤10) facts ranked by relevance (BM25 over title, text and tags), each with id, title, text, tags, canonical flag, score and a snippet.",
		Annotations: mcpx.ReadOnly("Search lore"),
		InputSchema: mcpx.InputSchema[SearchLoreInput](map[string]mcpx.Limit{
			"query": mcpx.StrLen(1, MaxQueryLen),
			"k":     mcpx.IntRange(1, MaxK),
		}),
	}, srv.searchLore)
	mcp.AddTool(s, &mcp.Tool{
		Name:        ToolCanonicalFact,
		Description: "Get one canonical lore fact by its id (factId) or by a title/topic (topic). A topic matches a canonical fact's title exactly (case-insensitive) or else the best-ranked canonical fact.",
		Annotations: mcpx.ReadOnly("Get canonical fact"),
		InputSchema: canonicalFactSchema(),
	}, srv.getCanonicalFact)
	mcpx.AddEntityResources(s, srv.loreKind())
	return srv, nil
}

// loreKind publishes every lore fact (canonical or not) as worldgate://lore/{name}.
func (s *Server) loreKind() mcpx.EntityKind {
	return mcpx.EntityKind{Collection: "lore", Prefix: "lore:", Title: "Lore fact",
		Description: "A curated lore fact: id, title, text, tags, canonical flag and what it is about.",
		Read: func(ctx context.Context, id string) (any, error) {
			if err := s.ensureFresh(ctx); err != nil {
				return nil, err
			}
			if f, ok := s.index.Get(id); ok {
				return f, nil
			}
			return nil, nil
		},
		IDs: func(ctx context.Context, limit int) ([]string, error) {
			if err := s.ensureFresh(ctx); err != nil {
				return nil, err
			}
			return s.index.IDs(limit), nil
		}}
}

// canonicalFactSchema is get-canonical-fact's input schema: exactly one of
// factId and topic (oneOf), each non-empty.
func canonicalFactSchema() *jsonschema.Schema {
	s := mcpx.InputSchema[GetCanonicalFactInput](map[string]mcpx.Limit{
		"factId": mcpx.StrLen(1, MaxIDLen),
		"topic":  mcpx.StrLen(1, MaxTopicLen),
	})
	// The anchors name the alternatives in the validator's messages.
	s.OneOf = []*jsonschema.Schema{{Anchor: "factId-alone", Required: []string{"factId"}}, {Anchor: "topic-alone", Required: []string{"topic"}}}
	return s
}

// MCP returns the MCP server.
func (s *Server) MCP() *mcp.Server { return s.mcp }

// Handler serves the MCP endpoint over Streamable HTTP (scope lore:read).
func (s *Server) Handler() http.Handler {
	return s.opts.HTTPHandler(s.mcp, mcpx.ScopeLoreRead)
}

// Index returns the lore index.
func (s *Server) Index() *Index { return s.index }

// Close releases the graph connection (if New created it).
func (s *Server) Close() {
	if s.graph != nil && s.opts.GraphConn == nil {
		s.graph.Close()
	}
}

// Refresh reloads the facts from the graph (if configured) plus Options.Facts.
func (s *Server) Refresh(ctx context.Context) error {
	s.refreshMu.Lock()
	defer s.refreshMu.Unlock()
	return s.refreshLocked(ctx)
}

func (s *Server) refreshLocked(ctx context.Context) error {
	var facts []Fact
	if s.graph != nil {
		var err error
		if facts, err = s.loadFromGraph(ctx); err != nil {
			return err
		}
	}
	facts = append(facts, s.opts.Facts...) // later entries override by id
	dedup := map[string]int{}
	var out []Fact
	for _, f := range facts {
		if i, ok := dedup[f.ID]; ok {
			out[i] = f
			continue
		}
		dedup[f.ID] = len(out)
		out = append(out, f)
	}
	return s.index.Replace(ctx, out)
}

// Run refreshes periodically until ctx is done.
func (s *Server) Run(ctx context.Context) {
	t := time.NewTicker(s.opts.RefreshInterval)
	defer t.Stop()
	for {
		if err := s.Refresh(ctx); err != nil && ctx.Err() == nil && s.opts.Logger != nil {
			s.opts.Logger.Warn("lore refresh failed", "error", err.Error())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Ready reports whether facts can be served (for /readyz).
func (s *Server) Ready(ctx context.Context) error { return s.ensureFresh(ctx) }

// ensureFresh loads the index if it was never loaded or is stale. A stale
// index whose refresh fails keeps serving; a never-loaded one is an error.
func (s *Server) ensureFresh(ctx context.Context) error {
	loaded := s.index.Loaded()
	if !loaded.IsZero() && (s.graph == nil || time.Since(loaded) < s.opts.RefreshInterval) {
		return nil
	}
	if !loaded.IsZero() && !s.refreshMu.TryLock() {
		return nil // someone is refreshing; serve what we have
	}
	if loaded.IsZero() {
		s.refreshMu.Lock()
	}
	defer s.refreshMu.Unlock()
	if l := s.index.Loaded(); l != loaded {
		return nil // refreshed while we waited
	}
	err := s.refreshLocked(ctx)
	if err != nil && loaded.IsZero() {
		return fmt.Errorf("lore index unavailable: %w", err)
	}
	return nil
}

func (s *Server) loadFromGraph(ctx context.Context) ([]Fact, error) {
	vs, err := s.graph.Submit(ctx, func(g *gremlingo.GraphTraversalSource) *gremlingo.GraphTraversal {
		return g.V().HasLabel("LoreFact").ElementMap()
	})
	if err != nil {
		return nil, fmt.Errorf("reading LoreFact vertices: %w", err)
	}
	es, err := s.graph.Submit(ctx, func(g *gremlingo.GraphTraversalSource) *gremlingo.GraphTraversal {
		return g.V().HasLabel("LoreFact").OutE("about").ElementMap()
	})
	if err != nil {
		return nil, fmt.Errorf("reading about edges: %w", err)
	}
	about := map[string][]string{}
	for _, e := range es {
		if p, ok := graphx.AsProps(e); ok {
			from, to := p.Ref("OUT"), p.Ref("IN")
			about[from] = append(about[from], to)
		}
	}
	facts := make([]Fact, 0, len(vs))
	for _, v := range vs {
		p, ok := graphx.AsProps(v)
		if !ok {
			continue
		}
		id := p.String("id")
		ab := about[id]
		if ab == nil {
			ab = []string{}
		}
		facts = append(facts, Fact{ID: id, Title: p.String("title"), Text: p.String("text"), Tags: p.Strings("tags"), Canonical: p.Bool("canonical"), About: ab})
	}
	return facts, nil
}

func (s *Server) searchLore(ctx context.Context, _ *mcp.CallToolRequest, in SearchLoreInput) (*mcp.CallToolResult, SearchLoreOutput, error) {
	q := strings.TrimSpace(in.Query)
	switch {
	case q == "":
		return nil, SearchLoreOutput{}, mcpx.InvalidInput("query must not be blank")
	case len(in.Query) > MaxQueryLen:
		return nil, SearchLoreOutput{}, mcpx.InvalidInput("query is %d bytes; at most %d allowed", len(in.Query), MaxQueryLen)
	case in.K < 0 || in.K > MaxK:
		return nil, SearchLoreOutput{}, mcpx.InvalidInput("k is %d; it must be between 1 and %d", in.K, MaxK)
	case len(in.Tags) > MaxTags:
		return nil, SearchLoreOutput{}, mcpx.InvalidInput("%d tags given; at most %d allowed", len(in.Tags), MaxTags)
	}
	for _, t := range in.Tags {
		if t == "" || len(t) > MaxTagLen {
			return nil, SearchLoreOutput{}, mcpx.InvalidInput("each tag must be 1..%d characters", MaxTagLen)
		}
	}
	k := in.K
	if k == 0 {
		k = DefaultK
	}
	if err := s.ensureFresh(ctx); err != nil {
		return nil, SearchLoreOutput{}, err
	}
	hits, err := s.index.Search(ctx, q, SearchOptions{K: k, Tags: in.Tags, CanonicalOnly: in.CanonicalOnly})
	if err != nil {
		return nil, SearchLoreOutput{}, err
	}
	return nil, SearchLoreOutput{Query: q, Hits: hits, IndexedFacts: s.index.Len()}, nil
}

func (s *Server) getCanonicalFact(ctx context.Context, _ *mcp.CallToolRequest, in GetCanonicalFactInput) (*mcp.CallToolResult, GetCanonicalFactOutput, error) {
	id, topic := strings.TrimSpace(in.FactID), strings.TrimSpace(in.Topic)
	switch {
	case (id == "") == (topic == ""):
		return nil, GetCanonicalFactOutput{}, mcpx.InvalidInput("%s", CanonicalFactShape)
	case len(id) > MaxIDLen:
		return nil, GetCanonicalFactOutput{}, mcpx.InvalidInput("factId is %d bytes; at most %d allowed", len(id), MaxIDLen)
	case len(topic) > MaxTopicLen:
		return nil, GetCanonicalFactOutput{}, mcpx.InvalidInput("topic is %d bytes; at most %d allowed", len(topic), MaxTopicLen)
	}
	if err := s.ensureFresh(ctx); err != nil {
		return nil, GetCanonicalFactOutput{}, err
	}
	if id != "" {
		f, ok := s.index.Get(id)
		if !ok {
			return nil, GetCanonicalFactOutput{}, mcpx.NotFound("no lore fact with id %q (%d facts indexed); search-lore finds facts by words", id, s.index.Len())
		}
		if !f.Canonical {
			return nil, GetCanonicalFactOutput{}, mcpx.NotFound("lore fact %q exists but is not canonical", id)
		}
		return nil, GetCanonicalFactOutput{Fact: f, MatchedBy: "id"}, nil
	}
	for _, f := range s.index.ByTitle(topic) {
		if f.Canonical {
			return nil, GetCanonicalFactOutput{Fact: f, MatchedBy: "title"}, nil
		}
	}
	hits, err := s.index.Search(ctx, topic, SearchOptions{K: 1, CanonicalOnly: true})
	if err != nil {
		return nil, GetCanonicalFactOutput{}, err
	}
	if len(hits) == 0 {
		return nil, GetCanonicalFactOutput{}, mcpx.NotFound("no canonical lore fact matches topic %q (%d facts indexed)", topic, s.index.Len())
	}
	return nil, GetCanonicalFactOutput{Fact: hits[0].Fact, MatchedBy: "search"}, nil
}
