package server_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"
	"github.com/gorilla/websocket"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/google/uuid"
	gb "github.com/worldgate/worldgate/services/graphd/graphbinary"
	"github.com/worldgate/worldgate/services/graphd/graphdtest"
)

const seedDir = "../graphbinary/testdata/seed"

// TestCaptureSeeds regenerates the fuzz seed corpus from frames the real
// gremlin-go client sends. Run with GRAPHD_CAPTURE_SEEDS=1.
func TestCaptureSeeds(t *testing.T) {
	if os.Getenv("GRAPHD_CAPTURE_SEEDS") == "" {
		t.Skip("set GRAPHD_CAPTURE_SEEDS=1 to regenerate testdata/seed")
	}
	var mu sync.Mutex
	var frames [][]byte
	up := websocket.Upgrader{}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		for {
			_, msg, err := ws.ReadMessage()
			if err != nil {
				return
			}
			mu.Lock()
			frames = append(frames, msg)
			mu.Unlock()
			// answer 204 so the client moves on
			id := uuid.UUID{}
			copy(id[:], msg[1+int(msg[0])+1:])
			resp, _ := gb.WriteResponse(&gb.Response{RequestID: id, Code: 204}, nil)
			_ = ws.WriteMessage(websocket.BinaryMessage, resp)
		}
	}))
	defer hs.Close()
	conn, err := gremlingo.NewDriverRemoteConnection("ws"+strings.TrimPrefix(hs.URL, "http")+"/gremlin", func(s *gremlingo.DriverRemoteConnectionSettings) {
		s.LogVerbosity = gremlingo.Off
	})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	g := gremlingo.Traversal_().WithRemote(conn)
	M := gremlingo.Merge
	for _, tr := range []GT{
		g.V().Has("person", "name", "marko").Out("knows").Values("name"),
		g.MergeV(map[any]any{T.Id: "npc:1", T.Label: "NPC"}).Option(M.OnCreate, map[any]any{"name": "Ann", "version": int64(1)}).Option(M.OnMatch, map[any]any{"name": "Ann"}),
		g.MergeE(map[any]any{gremlingo.Direction.From: "loc:a", gremlingo.Direction.To: "loc:b", T.Label: "exit"}),
		g.AddE("exit").From(__.V("loc:a")).To(__.V("loc:b")).Property("direction", "north"),
		g.V("x").Fold().Coalesce(__.Unfold(), __.AddV("Item").Property(T.Id, "x")),
		g.V().HasLabel("NPC").Has("name", TP.Containing("a")).Has("age", P.Within(int32(1), int64(2), 3.5)).Project("a", "b").By(T.Id).By(__.ElementMap()),
		g.WithStrategies(gremlingo.ReadOnlyStrategy()).V().ValueMap(true).Order().By("name", gremlingo.Order.Desc).Limit(5),
		g.Inject(uuid.New(), time.UnixMilli(0), []any{1, "a"}, nil, true).Fold(),
		g.V().Repeat(__.Out()).Times(2).Emit().Path().By("name"),
		g.V().Group().By(T.Label).By(__.Count()).Select(gremlingo.Column.Values),
	} {
		if _, err := tr.ToList(); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(seedDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, f := range frames {
		if err := os.WriteFile(filepath.Join(seedDir, fmt.Sprintf("gremlin-go-%02d.bin", i)), f, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("wrote %d frames", len(frames))
}

// TestServerSurvivesMangledFrames sends the seed corpus, truncated and
// bit-flipped, to a live server; it must keep answering.
func TestServerSurvivesMangledFrames(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(seedDir, "*.bin"))
	if len(files) == 0 {
		t.Fatal("no seed frames")
	}
	srv := graphdtest.Start(t, graphdtest.InMemory(), graphdtest.WithoutAuth())
	g := writer(t, srv)
	r := dialRaw(t, srv)
	sent := 0
	for _, f := range files {
		frame, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for cut := 0; cut < len(frame); cut += 7 {
			r.sendFrame(frame[:cut])
			r.read()
			sent++
		}
		for i := 0; i < len(frame); i += 3 {
			m := append([]byte(nil), frame...)
			m[i] ^= 0xA5
			r.sendFrame(m)
			resp := r.read()
			if resp.nullID {
				t.Fatal("null request id")
			}
			sent++
			for resp.code == 206 {
				resp = r.read()
			}
		}
	}
	if got := one(t, g.Inject("alive")); got != "alive" {
		t.Fatalf("server unhealthy after %d mangled frames", sent)
	}
	t.Logf("%d mangled frames answered", sent)
}
