package harness

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/worldgate/worldgate/services/gate/gates"
	"github.com/worldgate/worldgate/shared/natsx/natsauth"
)

// TestEmbeddedWorkersConnectAsTheirOwnUsers holds the bench harness to the per-worker NATS
// users: it starts the embedded pipeline and reads, from the server itself, which user each
// client connection authenticated as. The only admin connection is the harness's own (the
// load generator's); every worker has its role's user.
func TestEmbeddedWorkersConnectAsTheirOwnUsers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e, err := StartEmbedded(ctx, EmbeddedOptions{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Stop()

	own, err := e.Conn.GetClientID()
	if err != nil {
		t.Fatal(err)
	}
	connz, err := e.NATS.Server().Connz(&server.ConnzOptions{Username: true, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	users := map[string]int{}
	for _, c := range connz.Conns {
		if c.AuthorizedUser == "" {
			t.Errorf("connection %d (%q) authenticated as nobody", c.Cid, c.Name)
		}
		if c.AuthorizedUser == natsauth.Admin && c.Cid != own {
			t.Errorf("connection %d (%q) is the admin: a worker must connect as its own user", c.Cid, c.Name)
		}
		users[c.AuthorizedUser]++
	}
	want := []string{natsauth.EventProcessor, natsauth.AIWorker, natsauth.MCPWorld}
	for _, p := range gates.Builtin().OneProcessPerGate() {
		want = append(want, p.User())
	}
	for _, u := range want {
		if users[u] == 0 {
			t.Errorf("no connection as %s; connections by user: %v", u, users)
		}
	}
	if users[natsauth.Admin] != 1 {
		t.Errorf("%d admin connections, want 1 (the harness's own)", users[natsauth.Admin])
	}
	t.Logf("connections by user: %v", users)
}
