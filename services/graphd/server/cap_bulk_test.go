package server_test

import (
	"testing"

	"github.com/worldgate/worldgate/services/graphd/graphdtest"
	"github.com/worldgate/worldgate/services/graphd/server"
)

// TestCapKeepsBulks checks that cap() does not expand merged traversers
// (it reads only the side effect): more traversers than MaxResults, merged
// by bulk, reach it and the group counts them all.
func TestCapKeepsBulks(t *testing.T) {
	srv := graphdtest.Start(t, graphdtest.InMemory(), graphdtest.WithConfig(func(c *server.Config) { c.MaxResults = 50 }))
	g := writer(t, srv)
	loadModern(t, g)
	// both() three times from every vertex: 72 walks, more than 50
	got := one(t, g.V().Repeat(__.Both()).Times(3).GroupCount("a").By(T.Label).Cap("a"))
	if want := "{person:48,software:24}"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}
