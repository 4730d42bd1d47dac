package evalset

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/event-processor/apply"
	"github.com/worldgate/worldgate/services/gate/gates"
	"github.com/worldgate/worldgate/services/graphd/server"
	"github.com/worldgate/worldgate/services/mcp-classify/classifytools"
	"github.com/worldgate/worldgate/services/worldgate/worldfile"
	"github.com/worldgate/worldgate/shared/graphx"
	"github.com/worldgate/worldgate/shared/mcpx"
	"github.com/worldgate/worldgate/shared/mcpx/client"
	"github.com/worldgate/worldgate/shared/natsx"
)

// parts are the real components the gates need, started in this process: graphd holding the
// evaluation world (invariant), an embedded NATS server with dedup's KV bucket (dedup), and
// mcp-classify served over MCP's Streamable HTTP on loopback (safety).
type parts struct {
	graph   *server.Server
	reader  *graphx.Conn
	nats    *natsx.Embedded
	nc      *nats.Conn
	js      jetstream.JetStream
	dedupKV jetstream.KeyValue
	http    *http.Server
	mcp     *client.Client
	dir     string
	stops   []func()
}

const (
	graphWriter, graphWriterPassword = "eval-writer", "eval-writer-password"
	graphReader, graphReaderPassword = "eval-reader", "eval-reader-password"
	classifyToken                    = "worldgate-eval"
)

func startParts(ctx context.Context, w *worldfile.World, log *slog.Logger) (_ *parts, err error) {
	p := &parts{}
	defer func() {
		if err != nil {
			p.close()
		}
	}()
	// graphd, in memory, with a writer (the world loader) and a read-only reader (the gate).
	p.graph, err = server.New(server.Config{Listen: "127.0.0.1:0", Logger: log,
		Users: []server.User{{Name: graphWriter, Password: graphWriterPassword}, {Name: graphReader, Password: graphReaderPassword, ReadOnly: true}}})
	if err != nil {
		return nil, err
	}
	if err := p.graph.Start(ctx); err != nil {
		return nil, err
	}
	p.stops = append(p.stops, func() {
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = p.graph.Close(c)
	})
	writer, err := graphx.Open(graphx.Settings{URL: p.graph.URL(), Username: graphWriter, Password: graphWriterPassword})
	if err != nil {
		return nil, err
	}
	p.stops = append(p.stops, writer.Close)
	if err := loadWorld(ctx, writer, w); err != nil {
		return nil, err
	}
	p.reader, err = graphx.Open(graphx.Settings{URL: p.graph.URL(), Username: graphReader, Password: graphReaderPassword, ReadOnly: true})
	if err != nil {
		return nil, err
	}
	p.stops = append(p.stops, p.reader.Close)

	// NATS with the dedup bucket as the topology defines it (its TTL, its limits).
	p.dir, err = os.MkdirTemp("", "worldgate-eval-")
	if err != nil {
		return nil, err
	}
	p.stops = append(p.stops, func() { _ = os.RemoveAll(p.dir) })
	p.nats, err = natsx.StartEmbedded(natsx.EmbeddedConfig{StoreDir: p.dir, Logger: log})
	if err != nil {
		return nil, err
	}
	p.stops = append(p.stops, p.nats.Shutdown)
	p.nc, p.js, err = natsx.Connect(natsx.ConnConfig{URL: p.nats.ClientURL(), Name: "worldgate-eval"}, log)
	if err != nil {
		return nil, err
	}
	p.stops = append(p.stops, p.nc.Close)
	var topo natsx.Topology
	for _, b := range natsx.DefaultTopology(natsx.TopologyOptions{}).Buckets {
		if b.Bucket == natsx.BucketDedup {
			topo.Buckets = append(topo.Buckets, b)
		}
	}
	if len(topo.Buckets) != 1 {
		return nil, errors.New("the topology has no " + natsx.BucketDedup + " bucket")
	}
	if err := natsx.Provision(ctx, p.js, topo, log); err != nil {
		return nil, err
	}
	if p.dedupKV, err = p.js.KeyValue(ctx, natsx.BucketDedup); err != nil {
		return nil, err
	}

	// mcp-classify with its embedded policy, and the gates' MCP client.
	srv, err := classifytools.New(classifytools.Options{Options: mcpx.Options{Logger: log, Auth: mcpx.AuthConfig{
		StaticTokens: map[string]mcpx.Principal{classifyToken: {Subject: "worldgate-eval", Scopes: []string{mcpx.ScopeClassifyRead}}}}}})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p.http = &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.http.Serve(ln) }()
	p.stops = append(p.stops, func() { _ = p.http.Close() })
	p.mcp, err = client.New(ctx, client.Config{Servers: []client.ServerConfig{{Name: "classify", URL: "http://" + ln.Addr().String(), Token: classifyToken, Timeout: 10 * time.Second}},
		AllowList: []string{gates.ModerateTool}, Logger: log})
	if err != nil {
		return nil, err
	}
	p.stops = append(p.stops, func() { _ = p.mcp.Close() })
	return p, nil
}

func (p *parts) close() {
	for i := len(p.stops) - 1; i >= 0; i-- {
		p.stops[i]()
	}
	p.stops = nil
}

// loadWorld writes the world into the graph the way the event-processor commits it: each of the
// world file's proposals built into apply commands and submitted in order.
func loadWorld(ctx context.Context, g *graphx.Conn, w *worldfile.World) error {
	props, err := worldfile.Proposals(w, func(string) ([]string, error) { return nil, nil })
	if err != nil {
		return err
	}
	stamp := time.Now().UTC().Format(time.RFC3339Nano)
	for i := range props {
		cmds, err := apply.Build(&props[i])
		if err != nil {
			return fmt.Errorf("world %s: %s: %w", w.Name, props[i].ProposalID, err)
		}
		for _, c := range cmds {
			meta := apply.Meta{ProposalID: props[i].ProposalID, CorrelationID: props[i].CorrelationID, CommittedUTC: stamp, Source: "worldgate-eval"}
			res, err := g.Submit(ctx, func(gt *gremlingo.GraphTraversalSource) *gremlingo.GraphTraversal { return c.Traversal(gt, meta) })
			if err != nil {
				return fmt.Errorf("world %s: %s: %w", w.Name, props[i].ProposalID, err)
			}
			d, err := apply.ReadDecision(res)
			if err != nil {
				return err
			}
			if !d.Applied {
				return fmt.Errorf("world %s: %s was refused: %s", w.Name, props[i].ProposalID, d.Reason)
			}
		}
	}
	return nil
}

// newProposal is the proposal a gate checks for a case (or for content accepted before it).
func newProposal(id, kind string, payload []byte, at time.Time) *events.Proposal {
	return &events.Proposal{ProposalID: id, Kind: kind, SchemaVersion: events.ProposalSchemaVersion,
		CorrelationID: "eval:" + id, CausationID: "eval:" + id, AgentRole: "eval",
		Actor: events.Actor{Kind: "operator", ID: "worldgate-eval"}, Payload: payload, CreatedUTC: at}
}
