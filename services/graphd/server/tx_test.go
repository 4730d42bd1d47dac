package server_test

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/worldgate/worldgate/services/graphd/graphdtest"
	"github.com/worldgate/worldgate/services/graphd/server"
)

func count(t testing.TB, tr GT) int64 {
	t.Helper()
	res := toList(t, tr)
	if len(res) != 1 {
		t.Fatalf("count: %d results", len(res))
	}
	return res[0].(int64)
}

// TestTransactions drives g.Tx() through gremlin-go: what a transaction
// writes is visible inside it at once, outside only after Commit, never
// after Rollback; an open transaction blocks no one.
func TestTransactions(t *testing.T) {
	srv := graphdtest.Start(t)
	g := writer(t, srv)

	// Commit: visible inside at once, outside only after the commit.
	tx := g.Tx()
	gtx, err := tx.Begin()
	if err != nil {
		t.Fatal(err)
	}
	mustIterate(t, gtx.AddV("player").Property("name", "ada"))
	mustIterate(t, gtx.V().Has("player", "name", "ada").Property("level", int32(2)))
	if n := count(t, gtx.V().Has("player", "name", "ada").Has("level", int32(2)).Count()); n != 1 {
		t.Errorf("inside the transaction: %d, want its own write", n)
	}
	// outside: not visible, and not blocked by the open transaction
	done := make(chan int64, 1)
	go func() { done <- count(t, g.V().HasLabel("player").Count()) }()
	select {
	case n := <-done:
		if n != 0 {
			t.Errorf("outside before commit: %d players, want 0", n)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a read outside the transaction waited for it")
	}
	if err := tx.Commit(); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if n := count(t, g.V().Has("player", "name", "ada").Has("level", int32(2)).Count()); n != 1 {
		t.Errorf("after commit: %d, want 1", n)
	}

	// Rollback: never visible; the ids it saw are not reused.
	tx = g.Tx()
	gtx, err = tx.Begin()
	if err != nil {
		t.Fatal(err)
	}
	res := toList(t, gtx.AddV("player").Property("name", "bob").Id())
	bobID := res[0]
	mustIterate(t, gtx.V().Has("player", "name", "ada").Drop())
	if n := count(t, gtx.V().HasLabel("player").Count()); n != 1 {
		t.Errorf("inside: %d players, want 1 (bob; ada dropped)", n)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatalf("rollback: %v", err)
	}
	if got := norms(toList(t, g.V().HasLabel("player").Values("name")), false); strings.Join(got, ",") != "ada" {
		t.Errorf("after rollback: %v, want [ada]", got)
	}
	res = toList(t, g.AddV("other").Id())
	if fmt.Sprint(res[0]) == fmt.Sprint(bobID) {
		t.Errorf("the rolled-back transaction's id %v was handed out again", bobID)
	}

	// Closing the transaction without commit rolls back as well.
	tx = g.Tx()
	gtx, _ = tx.Begin()
	mustIterate(t, gtx.AddV("player").Property("name", "cy"))
	if err := tx.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if n := count(t, g.V().Has("name", "cy").Count()); n != 0 {
		t.Errorf("after close: %d, want 0", n)
	}

	// A failing traversal in a transaction undoes only itself.
	tx = g.Tx()
	gtx, _ = tx.Begin()
	mustIterate(t, gtx.AddV("player").Property("name", "dee"))
	if err := <-gtx.AddV("player").Property("name", "eve").Fail("no").Iterate(); err == nil {
		t.Error("fail() in a transaction: no error")
	}
	if err := tx.Commit(); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if got := norms(toList(t, g.V().HasLabel("player").Values("name")), false); strings.Join(got, ",") != "ada,dee" {
		t.Errorf("after a failed traversal and commit: %v, want [ada dee]", got)
	}

	// A commit whose writes no longer apply fails and applies nothing.
	tx = g.Tx()
	gtx, _ = tx.Begin()
	mustIterate(t, gtx.V().Has("name", "dee").Property("level", int32(9)))
	mustIterate(t, gtx.AddV("player").Property("name", "fay"))
	mustIterate(t, g.V().Has("name", "dee").Drop()) // committed outside meanwhile
	err = tx.Commit()
	if err == nil || !strings.Contains(err.Error(), "conflicts") {
		t.Errorf("conflicting commit: %v, want a conflict", err)
	}
	if n := count(t, g.V().Has("name", "fay").Count()); n != 0 {
		t.Errorf("a failed commit applied %d of its vertices", n)
	}

}

const txCrashEnv = "GRAPHD_TX_CRASH_CHILD_DIR"

// txCrashChild is TestTransactionCrash's child (TestMain runs it): it commits one
// transaction, leaves a second one open with a write acknowledged, says so
// and waits to be killed.
func txCrashChild(dir string) {
	g := childGraph(server.Config{Listen: "127.0.0.1:0", DataDir: dir})
	tx := g.Tx()
	gtx, _ := tx.Begin()
	if err := <-gtx.AddV("committed").Iterate(); err != nil {
		os.Exit(4)
	}
	if err := tx.Commit(); err != nil {
		os.Exit(5)
	}
	tx = g.Tx()
	gtx, _ = tx.Begin()
	if err := <-gtx.AddV("uncommitted").Iterate(); err != nil {
		os.Exit(6)
	}
	if err := <-gtx.AddV("uncommitted").Iterate(); err != nil {
		os.Exit(6)
	}
	fmt.Println("open")
	time.Sleep(time.Minute)
}

// TestTransactionCrash kills graphd (SIGKILL) while a transaction with
// acknowledged writes is open: after a restart the committed transaction is
// there and nothing of the open one.
func TestTransactionCrash(t *testing.T) {
	dir := t.TempDir()
	cmd, stdout := startChild(t, txCrashEnv, dir)
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "open" {
				ready <- true
				return
			}
		}
		ready <- false
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatal("the child ended before opening its transaction")
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("the child did not open its transaction in 30 s")
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	srv := graphdtest.Start(t, graphdtest.WithDataDir(dir))
	g := writer(t, srv)
	if n := count(t, g.V().HasLabel("committed").Count()); n != 1 {
		t.Errorf("after the crash: %d committed vertices, want 1", n)
	}
	if n := count(t, g.V().HasLabel("uncommitted").Count()); n != 0 {
		t.Errorf("after the crash: %d vertices of the open transaction, want 0", n)
	}
}

// TestSessionTimeout: an idle transaction is rolled back, and the session's
// next request is told so (not silently given a new transaction).
func TestSessionTimeout(t *testing.T) {
	srv := graphdtest.Start(t, graphdtest.InMemory(), graphdtest.WithConfig(func(c *server.Config) {
		c.SessionTimeout = 50 * time.Millisecond
	}))
	g := writer(t, srv)
	tx := g.Tx()
	gtx, err := tx.Begin()
	if err != nil {
		t.Fatal(err)
	}
	mustIterate(t, gtx.AddV("idle"))
	// Idleness is the absence of requests, so this waits instead of polling
	// the session (each poll would be activity).
	time.Sleep(10 * 50 * time.Millisecond)
	_, lastErr := gtx.V().Count().ToList()
	if lastErr == nil || !strings.Contains(lastErr.Error(), "idle timeout") {
		t.Errorf("error %v should say the session timed out", lastErr)
	}
	if err := tx.Commit(); err == nil {
		t.Error("commit after the timeout succeeded")
	}
	if n := count(t, g.V().HasLabel("idle").Count()); n != 0 {
		t.Errorf("the timed-out transaction left %d vertices", n)
	}
}
