package natsx_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/natsx"
)

func TestEmbeddedUsers(t *testing.T) {
	if _, err := natsx.StartEmbedded(natsx.EmbeddedConfig{StoreDir: t.TempDir(), Users: []natsx.User{{Name: "a.b", Password: "x"}}}); err == nil {
		t.Fatal("a user name with a dot was accepted: it cannot be an inbox token")
	}
	srv, err := natsx.StartEmbedded(natsx.EmbeddedConfig{StoreDir: t.TempDir(), Users: []natsx.User{
		{Name: "reader", Password: "secret", Permissions: &natsx.Permissions{Publish: []string{"allowed.>"}, Subscribe: []string{natsx.InboxPrefix("reader") + ".>"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()

	_, _, err = natsx.Connect(natsx.ConnConfig{URL: srv.ClientURL(), User: "reader", Password: "wrong"}, logx.Discard())
	if err == nil || !strings.Contains(err.Error(), "Authorization Violation") || !strings.Contains(err.Error(), `"reader"`) {
		t.Fatalf("wrong password: %v; want the server's reason naming the user", err)
	}
	nc, _, err := natsx.Connect(natsx.ConnConfig{URL: srv.ClientURL(), User: "reader", Password: "secret"}, logx.Discard())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	// The connection's inboxes are the user's own, the only ones it may subscribe to.
	if inbox := nc.NewInbox(); !strings.HasPrefix(inbox, "_INBOX.reader.") {
		t.Fatalf("inbox %s is not under _INBOX.reader", inbox)
	}
	// A request works through that inbox: no responder answers, rather than a permissions error.
	if _, err := nc.Request("allowed.echo", nil, time.Second); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("request on an allowed subject with no responder: %v; want %v", err, nats.ErrNoResponders)
	}
}
