package graphx

import (
	"context"
	"errors"
	"flag"
	"os"
	"testing"
	"time"

	"github.com/worldgate/worldgate/shared/config"
)

// The value bytes JanusGraph writes for an edge id with long vertex ids (taken from the
// custom-type fixture in gremlin-go's serializer tests), starting after the type name.
var longIDs = []byte{0, 0, 16, 1, 0, 0, 0, 0, 0, 0, 0, 0, 16, 240, 0, 0, 0, 0, 0, 0, 100, 21, 0, 0, 0, 0, 0, 0, 24, 30, 0, 0, 0, 0, 0, 0, 0, 32, 56}

func TestReadRelationIdentifierLongIDs(t *testing.T) {
	i := 0
	v, err := ReadRelationIdentifier(&longIDs, &i)
	if err != nil {
		t.Fatal(err)
	}
	want := RelationIdentifier{OutVertexID: int64(4336), TypeID: 25621, RelationID: 6174, InVertexID: int64(8248)}
	if v != want || i != len(longIDs) {
		t.Fatalf("got %#v at %d, want %#v at %d", v, i, want, len(longIDs))
	}
	if s := want.String(); s != "4ri-3cg-jrp-6d4" {
		t.Fatalf("String() = %s", s)
	}
}

func TestReadRelationIdentifierStringIDs(t *testing.T) {
	enc := func(s string) []byte {
		b := []byte(s)
		b[len(b)-1] |= 0x80
		return append([]byte{1}, b...)
	}
	data := []byte{0, 0, 16, 1, 0}
	data = append(data, enc("loc:gate")...)
	data = append(data, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 9)
	data = append(data, enc("loc:well")...)
	i := 0
	v, err := ReadRelationIdentifier(&data, &i)
	if err != nil {
		t.Fatal(err)
	}
	if want := (RelationIdentifier{OutVertexID: "loc:gate", TypeID: 7, RelationID: 9, InVertexID: "loc:well"}); v != want {
		t.Fatalf("got %#v", v)
	}
	short := data[:len(data)-3]
	i = 0
	if _, err := ReadRelationIdentifier(&short, &i); err == nil {
		t.Fatal("a truncated value was accepted")
	}
	bad := append([]byte{0, 0, 16, 2}, data[4:]...)
	i = 0
	if _, err := ReadRelationIdentifier(&bad, &i); err == nil {
		t.Fatal("a wrong type code was accepted")
	}
}

func TestOpenRefusesMissingURLAndBadCA(t *testing.T) {
	if _, err := Open(Settings{}); !errors.Is(err, ErrNotConfigured) {
		t.Fatalf("err = %v", err)
	}
	if _, err := Open(Settings{URL: "wss://x/gremlin", CAFile: "/nonexistent/ca.pem"}); err == nil {
		t.Fatal("a missing CA file was accepted")
	}
}

func TestUnreachableGraphIsATransportError(t *testing.T) {
	c, err := Open(Settings{URL: "ws://127.0.0.1:1/gremlin", ConnectionTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = c.Ping(context.Background())
	if !IsTransport(err) || IsServer(err) {
		t.Fatalf("Ping against a closed port: %v (transport %v)", err, IsTransport(err))
	}
}

// -graph-user is the graph user's flag everywhere; -graph-username (and its variable
// WORLDGATE_GRAPH_USERNAME), the event-processor's old spelling, still sets it.
func TestGraphUserFlagAndItsDeprecatedAlias(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{nil, nil, "reader"},
		{[]string{"-graph-user", "a"}, nil, "a"},
		{[]string{"-graph-username", "b"}, nil, "b"},
		{nil, map[string]string{"WORLDGATE_GRAPH_USER": "c"}, "c"},
		{nil, map[string]string{"WORLDGATE_GRAPH_USERNAME": "d"}, "d"},
	} {
		for k, v := range c.env {
			t.Setenv(k, v)
		}
		s := Settings{Username: "reader"}
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		s.RegisterFlags(fs, "graph-")
		if err := config.Parse(fs, c.args, config.Prefix); err != nil {
			t.Fatal(err)
		}
		if s.Username != c.want {
			t.Errorf("%v %v: user %q, want %q", c.args, c.env, s.Username, c.want)
		}
		for k := range c.env {
			os.Unsetenv(k)
		}
	}
}
