package server_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"
	"github.com/worldgate/worldgate/services/graphd/graphdtest"
	"github.com/worldgate/worldgate/services/graphd/server"
	"github.com/worldgate/worldgate/shared/logx/logxtest"
)

// TestConcurrentMergeV: 8 goroutines × 1,000 mergeV over overlapping ids leave
// exactly the distinct count.
func TestConcurrentMergeV(t *testing.T) {
	srv := graphdtest.Start(t)
	g, _ := connect(t, srv, graphdtest.WriterUser, graphdtest.WriterPassword)
	const workers, per, distinct = 8, 1000, 1500
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < per; i++ {
				id := fmt.Sprintf("npc:%d", (w*211+i)%distinct)
				err := <-g.MergeV(map[any]any{T.Id: id, T.Label: "NPC"}).
					Option(gremlingo.Merge.OnCreate, map[any]any{"created_by": int64(w)}).
					Option(gremlingo.Merge.OnMatch, map[any]any{"touched_by": int64(w)}).Iterate()
				if err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// how many distinct ids did we touch?
	seen := map[int]bool{}
	for w := 0; w < workers; w++ {
		for i := 0; i < per; i++ {
			seen[(w*211+i)%distinct] = true
		}
	}
	if got := one(t, g.V().HasLabel("NPC").Count()); got != fmt.Sprint(len(seen)) {
		t.Errorf("vertices = %s, want %d", got, len(seen))
	}
	if got := one(t, g.V().HasLabel("NPC").Has("created_by").Count()); got != fmt.Sprint(len(seen)) {
		t.Errorf("created_by = %s, want %d", got, len(seen))
	}
}

// TestRestartRecovers: data written before a graceful close is there after a
// restart, including after compaction and further writes.
func TestRestartRecovers(t *testing.T) {
	dir := t.TempDir()
	start := func() *server.Server {
		srv, err := server.New(server.Config{Listen: "127.0.0.1:0", DataDir: dir, CompactBytes: 4096})
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		return srv
	}
	srv := start()
	g, conn := connect(t, srv, "", "")
	loadModern(t, g)
	for i := 0; i < 50; i++ { // enough to trigger compaction at 4 KiB
		mustIterate(t, g.V(int64(1)).Property("counter", int64(i)))
	}
	mustIterate(t, g.V(int64(2)).Drop())
	conn.Close()
	if err := srv.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv = start()
	defer srv.Close(context.Background())
	g, _ = connect(t, srv, "", "")
	if got := one(t, g.V(int64(1)).Values("counter")); got != "49" {
		t.Errorf("counter %v", got)
	}
	if got := one(t, g.V().Count()); got != "5" {
		t.Errorf("vertices %v", got)
	}
	if got := one(t, g.E().Count()); got != "5" {
		t.Errorf("edges %v", got)
	}
	if got := one(t, g.V(int64(1)).Out("created").Values("name")); got != "lop" {
		t.Errorf("adjacency %v", got)
	}
	// generated ids do not collide with recovered ones
	mustIterate(t, g.AddV("new"))
	if got := one(t, g.V().Count()); got != "6" {
		t.Errorf("after addV %v", got)
	}
}

const crashEnv = "GRAPHD_CRASH_CHILD_DIR"

// crashChild is the child process of TestCrashRecovery (TestMain runs it): it runs graphd
// in-process and writes through gremlin-go, printing each acknowledged id.
func crashChild(dir string) {
	g := childGraph(server.Config{Listen: "127.0.0.1:0", DataDir: dir, CompactBytes: 256 << 10})
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				id := fmt.Sprintf("w%d:%d", w, i)
				err := <-g.MergeV(map[any]any{T.Id: id, T.Label: "Acked"}).Property("n", int64(i)).Iterate()
				if err != nil {
					continue
				}
				mu.Lock()
				fmt.Fprintln(out, "ack", id)
				out.Flush()
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()
}

// startChild starts this test binary as a crash test's child (TestMain dispatches it by env,
// which names its data directory dir) and returns it with its standard output.
func startChild(t *testing.T, env, dir string) (*exec.Cmd, io.Reader) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env+"="+dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, stdout
}

// TestCrashRecovery kills a writing child with SIGKILL and checks that every
// acknowledged write survives, then that a torn WAL tail is truncated.
func TestCrashRecovery(t *testing.T) {
	dir := t.TempDir()
	cmd, stdout := startChild(t, crashEnv, dir)
	var acked []string
	sc := bufio.NewScanner(stdout)
	deadline := time.Now().Add(20 * time.Second)
	for sc.Scan() {
		line := sc.Text()
		if id, ok := strings.CutPrefix(line, "ack "); ok {
			acked = append(acked, id)
		}
		if len(acked) >= 1500 || time.Now().After(deadline) {
			break
		}
	}
	// kill -9 while writers are mid-flight
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// drain acks that were printed before the kill landed
	for sc.Scan() {
		if id, ok := strings.CutPrefix(sc.Text(), "ack "); ok {
			acked = append(acked, id)
		}
	}
	_ = cmd.Wait()
	if len(acked) < 100 {
		t.Fatalf("child acknowledged only %d writes", len(acked))
	}

	check := func(logs *logxtest.Buffer) *server.Server {
		t.Helper()
		srv, err := server.New(server.Config{Listen: "127.0.0.1:0", DataDir: dir,
			Logger: slog.New(slog.NewTextHandler(logs, nil))})
		if err != nil {
			t.Fatalf("restart: %v", err)
		}
		if err := srv.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		g, _ := connect(t, srv, "", "")
		ids := make([]any, len(acked))
		for i, id := range acked {
			ids[i] = id
		}
		got := 0
		for i := 0; i < len(ids); i += 500 {
			n := toList(t, g.V(ids[i:min(i+500, len(ids))]...).Count())
			got += int(n[0].(int64))
		}
		if got != len(acked) {
			t.Errorf("after crash: %d of %d acknowledged vertices present", got, len(acked))
		}
		return srv
	}
	var logs logxtest.Buffer
	srv := check(&logs)
	if err := srv.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	// simulate a torn write at the tail: a record header promising more bytes
	f, err := os.OpenFile(filepath.Join(dir, "wal"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.Write([]byte{0, 0, 1, 0, 0xde, 0xad, 0xbe, 0xef, 1, 2, 3})
	f.Close()
	logs.Reset()
	srv = check(&logs)
	defer srv.Close(context.Background())
	if !strings.Contains(logs.String(), "torn WAL tail") {
		t.Errorf("torn tail not logged; logs:\n%s", logs.String())
	}
	t.Logf("%d acknowledged writes survived SIGKILL", len(acked))
}
