package mcpx

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// EntityKind publishes one kind of world entity as MCP resources with the URI
// template worldgate://<Collection>/{name}, where name is the entity's id
// without its prefix (loc:forge-row is worldgate://locations/forge-row).
type EntityKind struct {
	Collection  string // "locations"
	Prefix      string // "loc:"
	Title       string // "Location"
	Description string
	// Read returns the entity as a JSON-able value, or nil if there is none.
	Read func(ctx context.Context, id string) (any, error)
	// IDs lists the ids (for completion), at most limit.
	IDs func(ctx context.Context, limit int) ([]string, error)
}

// Template is the kind's URI template.
func (k EntityKind) Template() string { return "worldgate://" + k.Collection + "/{name}" }

// URI is the resource URI of id.
func (k EntityKind) URI(id string) string {
	return "worldgate://" + k.Collection + "/" + strings.TrimPrefix(id, k.Prefix)
}

// MaxCompletions is the most values a completion returns (the spec's cap).
const MaxCompletions = 100

// AddEntityResources registers kinds as resource templates on s and returns
// the completion handler for their {name} variables (set it as
// mcp.ServerOptions.CompletionHandler through Options.Completion). The MCP
// specification completes prompt and resource-template arguments; tool
// arguments take the same ids, so a client completes a tool's locationId by
// completing worldgate://locations/{name}.
func AddEntityResources(s *mcp.Server, kinds ...EntityKind) {
	for _, k := range kinds {
		k := k
		s.AddResourceTemplate(&mcp.ResourceTemplate{
			Name: k.Collection, Title: k.Title, URITemplate: k.Template(), MIMEType: "application/json", Description: k.Description,
		}, func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			uri := req.Params.URI
			name, ok := strings.CutPrefix(uri, "worldgate://"+k.Collection+"/")
			if !ok || name == "" || strings.ContainsAny(name, "/?#") || len(name) > 200 {
				return nil, mcp.ResourceNotFoundError(uri)
			}
			v, err := k.Read(ctx, k.Prefix+name)
			if err != nil {
				return nil, err
			}
			if v == nil {
				return nil, mcp.ResourceNotFoundError(uri)
			}
			b, err := json.Marshal(v)
			if err != nil {
				return nil, err
			}
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(b)}}}, nil
		})
	}
}

// EntityCompletion completes the {name} variable of the kinds' templates by
// prefix (case-insensitive), sorted, at most MaxCompletions.
func EntityCompletion(kinds ...EntityKind) func(context.Context, *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	return func(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
		p := req.Params
		if p == nil || p.Ref == nil || p.Ref.Type != "ref/resource" {
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{}}}, nil
		}
		for _, k := range kinds {
			if p.Ref.URI != k.Template() || p.Argument.Name != "name" {
				continue
			}
			ids, err := k.IDs(ctx, 10000)
			if err != nil {
				return nil, fmt.Errorf("listing %s: %w", k.Collection, err)
			}
			want := strings.ToLower(strings.TrimPrefix(p.Argument.Value, k.Prefix))
			var vals []string
			for _, id := range ids {
				n := strings.TrimPrefix(id, k.Prefix)
				if strings.HasPrefix(strings.ToLower(n), want) {
					vals = append(vals, n)
				}
			}
			slices.Sort(vals)
			total := len(vals)
			if len(vals) > MaxCompletions {
				vals = vals[:MaxCompletions]
			}
			if vals == nil {
				vals = []string{}
			}
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: vals, Total: total, HasMore: total > len(vals)}}, nil
		}
		return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{}}}, nil
	}
}
