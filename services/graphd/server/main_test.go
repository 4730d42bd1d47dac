package server_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"

	"github.com/worldgate/worldgate/services/graphd/server"
)

// TestMain runs this test binary as a crash test's child process when the parent asks for one
// (its environment names the child's data directory): the child is graphd in-process writing
// through gremlin-go until the parent kills it, never a test of its own.
func TestMain(m *testing.M) {
	if dir := os.Getenv(crashEnv); dir != "" {
		crashChild(dir)
		return
	}
	if dir := os.Getenv(txCrashEnv); dir != "" {
		txCrashChild(dir)
		return
	}
	os.Exit(m.Run())
}

// childGraph starts graphd with cfg in a crash test's child process and connects gremlin-go to
// it; a failure ends the child with exit status 3, which the parent reports.
func childGraph(cfg server.Config) *gremlingo.GraphTraversalSource {
	srv, err := server.New(cfg)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(3)
	}
	if err := srv.Start(context.Background()); err != nil {
		fmt.Println("error", err)
		os.Exit(3)
	}
	conn, err := gremlingo.NewDriverRemoteConnection(srv.URL(), func(s *gremlingo.DriverRemoteConnectionSettings) {
		s.LogVerbosity = gremlingo.Off
	})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(3)
	}
	return gremlingo.Traversal_().WithRemote(conn)
}
