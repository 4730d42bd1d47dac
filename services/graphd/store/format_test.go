package store

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/worldgate/worldgate/services/graphd/graph"
)

// copyDir copies testdata/format1 (a data directory written by graphd before
// storage format 2: a snapshot and a WAL with records after it).
func copyFixture(t *testing.T, name string) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"snapshot", "wal"} {
		b, err := os.ReadFile(filepath.Join("testdata", name, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func magicOf(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b[:8])
}

func values(v *graph.Vertex, key string) []any {
	var out []any
	for _, vp := range v.Properties(key) {
		out = append(out, vp.Value)
	}
	return out
}

// checkFormat1Content asserts the graph the fixture was written with.
func checkFormat1Content(t *testing.T, s *Store) {
	t.Helper()
	if err := s.Read(func(g *graph.Graph) error {
		if g.VertexCount() != 3 || g.EdgeCount() != 2 {
			t.Fatalf("got %d vertices and %d edges, want 3 and 2", g.VertexCount(), g.EdgeCount())
		}
		marko := g.Vertex(int64(1))
		if marko == nil || marko.Label != "person" {
			t.Fatalf("vertex 1: %+v", marko)
		}
		if got := values(marko, "location"); len(got) != 2 || got[0] != "san diego" || got[1] != "santa cruz" {
			t.Errorf("list property location = %v", got)
		}
		if got := values(g.Vertex("v-two"), "name"); len(got) != 1 || got[0] != "vadas" {
			t.Errorf("string-id vertex name = %v", got)
		}
		if got := values(g.Vertex(int64(3)), "lang"); len(got) != 1 || got[0] != "java" {
			t.Errorf("set property lang = %v", got)
		}
		if w, ok := g.Edge(int64(7)).Property("weight"); !ok || w != 0.5 {
			t.Errorf("edge 7 weight = %v", w)
		}
		ids := map[int64]bool{}
		for _, v := range g.Vertices() {
			for _, k := range v.Keys() {
				for _, vp := range v.Properties(k) {
					if ids[vp.ID] {
						t.Errorf("vertex property id %d used twice", vp.ID)
					}
					ids[vp.ID] = true
				}
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestFormat1DataDirectoryOpens: a data directory written in storage format
// 1 opens with its data, is rewritten in format 2, takes new writes with
// meta-properties, and opens again.
func TestFormat1DataDirectoryOpens(t *testing.T) {
	dir := copyFixture(t, "format1")
	if m := magicOf(t, filepath.Join(dir, "wal")); m != walMagicFormat1 {
		t.Fatalf("fixture WAL magic %q", m)
	}
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkFormat1Content(t, s)
	if m := magicOf(t, filepath.Join(dir, "snapshot")); m != snapMagic {
		t.Errorf("snapshot not migrated: magic %q", m)
	}
	if m := magicOf(t, filepath.Join(dir, "wal")); m != walMagic {
		t.Errorf("WAL not migrated: magic %q", m)
	}
	var vpID int64
	if err := s.Write(context.Background(), func(g *graph.Graph, tx *graph.Tx) error {
		vp, err := g.SetVertexPropertyMeta(tx, g.Vertex(int64(1)), graph.List, "location", "brussels", int64(77),
			[][2]any{{"startTime", int32(2005)}})
		if err != nil {
			return err
		}
		vpID = vp.ID
		return g.SetMetaProperty(tx, vp, "endTime", int32(2010))
	}); err != nil {
		t.Fatal(err)
	}
	if vpID != 77 {
		t.Errorf("vertex property id %d, want 77", vpID)
	}
	// Reopen from the WAL (no Close: a crash keeps the WAL as it is).
	s.walMu.Lock()
	s.wal.Close()
	s.wal = nil
	s.walMu.Unlock()
	s.lockF.Close()
	s2, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkFormat1Content2 := func(s2 *Store) {
		if err := s2.Read(func(g *graph.Graph) error {
			vps := g.Vertex(int64(1)).Properties("location")
			if len(vps) != 3 {
				t.Fatalf("location has %d values after reopening, want 3", len(vps))
			}
			vp := vps[2]
			st, _ := vp.Meta("startTime")
			et, _ := vp.Meta("endTime")
			if vp.ID != 77 || vp.Value != "brussels" || st != int32(2005) || et != int32(2010) {
				t.Errorf("after reopening: id %d value %v startTime %v endTime %v", vp.ID, vp.Value, st, et)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	checkFormat1Content2(s2)
	// Close writes a snapshot (format 2); the next open reads it.
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	s3, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Close()
	checkFormat1Content2(s3)
}
