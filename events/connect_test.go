package events

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Connect reads a role's credentials from worldgate dev's endpoints.json (approvers from
// nats.approvers) and says, in a sentence, what is missing; a successful connect against the
// dev stack is tested in services/worldgate (TestReadmeGoClientAgainstDev).
func TestConnectCredentials(t *testing.T) {
	path := filepath.Join(t.TempDir(), "endpoints.json")
	if err := os.WriteFile(path, []byte(`{"nats.url":"nats://127.0.0.1:1","nats.publisher":{"user":"publisher","password":"p"},
"nats.approvers":{"alice":{"user":"approver-alice","password":"a"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	url, user, pass, err := endpointsCredentials(path, "approver-alice")
	if err != nil || url != "nats://127.0.0.1:1" || user != "approver-alice" || pass != "a" {
		t.Fatalf("approver: %q %q %q %v", url, user, pass, err)
	}
	ctx := context.Background()
	for _, c := range []struct {
		o    ConnectOptions
		want string
	}{
		{ConnectOptions{Endpoints: path, Role: "operator"}, `names no NATS user "operator"`},
		{ConnectOptions{Endpoints: filepath.Join(t.TempDir(), "none.json")}, "worldgate dev writes them to <data dir>/endpoints.json"},
		{ConnectOptions{Role: "publisher", Password: "p"}, "no NATS URL"},
		{ConnectOptions{URL: "nats://127.0.0.1:1"}, "no credentials"},
		{ConnectOptions{Endpoints: path}, "connect to nats://127.0.0.1:1 as publisher"}, // nothing listens there
	} {
		if _, _, err := Connect(ctx, c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v; want %q", c.o, err, c.want)
		}
	}
}
