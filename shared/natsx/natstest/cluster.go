package natstest

import (
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/natsx"
)

// Cluster is a JetStream cluster of in-process servers on fixed ports, so that a node can be
// stopped and started again on its own data (a node lost, a node restarted).
type Cluster struct {
	t     testing.TB
	Nodes []*natsx.Embedded // nil while a node is stopped
	ports []int             // client ports
	route []int             // cluster ports
	dirs  []string
}

// StartCluster starts n servers (n ≥ 3 for a quorum that survives one loss) and stops them when
// the test ends. It returns once every node accepts connections; the meta leader may still be
// being elected.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	c := &Cluster{t: t, Nodes: make([]*natsx.Embedded, n)}
	for range n {
		c.ports = append(c.ports, freePort(t))
		c.route = append(c.route, freePort(t))
		c.dirs = append(c.dirs, t.TempDir())
	}
	t.Cleanup(func() {
		for i := range c.Nodes {
			c.Stop(i)
		}
	})
	for i := range n {
		c.Start(i)
	}
	return c
}

// URL is node i's client URL.
func (c *Cluster) URL(i int) string { return fmt.Sprintf("nats://127.0.0.1:%d", c.ports[i]) }

// URLs is every node's client URL, comma-separated (a client that fails over).
func (c *Cluster) URLs() string {
	var u []string
	for i := range c.ports {
		u = append(u, c.URL(i))
	}
	return strings.Join(u, ",")
}

// Connect connects to node i as a worker does (reconnecting for ever); the connection closes
// when the test ends.
func (c *Cluster) Connect(i int) (*nats.Conn, jetstream.JetStream) {
	c.t.Helper()
	nc, js, err := natsx.Connect(natsx.ConnConfig{URL: c.URL(i), Name: c.t.Name()}, logx.Discard())
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(nc.Close)
	return nc, js
}

// Start starts node i (again) on its data directory.
func (c *Cluster) Start(i int) {
	c.t.Helper()
	if c.Nodes[i] != nil {
		return
	}
	var routes []string
	for j, p := range c.route {
		if j != i {
			routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
		}
	}
	srv, err := natsx.StartEmbedded(natsx.EmbeddedConfig{Port: c.ports[i], StoreDir: c.dirs[i], Configure: func(o *server.Options) {
		o.ServerName = fmt.Sprintf("n%d", i+1)
		o.Cluster = server.ClusterOpts{Name: "test", Host: "127.0.0.1", Port: c.route[i]}
		o.Routes = server.RoutesFromStr(strings.Join(routes, ","))
	}})
	if err != nil {
		c.t.Fatalf("node %d: %v", i+1, err)
	}
	c.Nodes[i] = srv
}

// Stop shuts node i down (JetStream flushes its files); it is safe to call twice.
func (c *Cluster) Stop(i int) {
	if c.Nodes[i] != nil {
		c.Nodes[i].Shutdown()
		c.Nodes[i] = nil
	}
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
