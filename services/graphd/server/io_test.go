package server_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"

	"github.com/worldgate/worldgate/services/graphd/graphdtest"
	"github.com/worldgate/worldgate/services/graphd/server"
)

// A GraphSON 3 adjacency list as TinkerPop writes it: two vertices, one edge
// (in the out vertex's outE and the in vertex's inE).
const ioGraphSON = `{"id":{"@type":"g:Int32","@value":1},"label":"person","outE":{"knows":[{"id":{"@type":"g:Int32","@value":7},"inV":{"@type":"g:Int32","@value":2},"properties":{"weight":{"@type":"g:Double","@value":0.5}}}]},"properties":{"name":[{"id":{"@type":"g:Int64","@value":0},"value":"marko"}],"age":[{"id":{"@type":"g:Int64","@value":1},"value":{"@type":"g:Int32","@value":29}}]}}
{"id":{"@type":"g:Int32","@value":2},"label":"person","inE":{"knows":[{"id":{"@type":"g:Int32","@value":7},"outV":{"@type":"g:Int32","@value":1},"properties":{"weight":{"@type":"g:Double","@value":0.5}}}]},"properties":{"name":[{"id":{"@type":"g:Int64","@value":2},"value":"vadas"}],"age":[{"id":{"@type":"g:Int64","@value":3},"value":{"@type":"g:Int32","@value":27}}]}}
`

// GraphML as TinkerPop's GraphMLWriter writes it: typed keys, labels in
// labelV/labelE data.
const ioGraphML = `<?xml version="1.0" ?>
<graphml xmlns="http://graphml.graphdrawing.org/xmlns">
  <key id="labelV" for="node" attr.name="labelV" attr.type="string"></key>
  <key id="name" for="node" attr.name="name" attr.type="string"></key>
  <key id="age" for="node" attr.name="age" attr.type="int"></key>
  <key id="labelE" for="edge" attr.name="labelE" attr.type="string"></key>
  <key id="weight" for="edge" attr.name="weight" attr.type="double"></key>
  <graph id="G" edgedefault="directed">
    <node id="1"><data key="labelV">person</data><data key="name">marko</data><data key="age">29</data></node>
    <node id="3"><data key="labelV">software</data><data key="name">lop</data></node>
    <node id="4"><data key="labelV">person</data><data key="name">josh</data><data key="age">32</data></node>
    <edge id="9" source="1" target="3"><data key="labelE">created</data><data key="weight">0.4</data></edge>
    <edge id="11" source="4" target="3"><data key="labelE">created</data><data key="weight">0.4</data></edge>
  </graph>
</graphml>
`

func ioServer(t *testing.T, dir string) *gremlingo.GraphTraversalSource {
	t.Helper()
	srv := graphdtest.Start(t, graphdtest.InMemory(), graphdtest.WithConfig(func(c *server.Config) { c.IODir = dir }))
	return writer(t, srv)
}

// TestIORead reads a GraphSON and a GraphML file from graphd's io directory
// through gremlin-go, with the format chosen by extension and by IO.reader.
func TestIORead(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{"data/g.json": ioGraphSON, "g.xml": ioGraphML, "graphson.txt": ioGraphSON} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name string
		read func(g *gremlingo.GraphTraversalSource) *gremlingo.GraphTraversal
		v, e int64
		age  any // marko's age as read back
		w    any // an edge's weight
	}{
		{"graphson by extension", func(g *gremlingo.GraphTraversalSource) *gremlingo.GraphTraversal { return g.Io("data/g.json").Read() }, 2, 1, int32(29), 0.5},
		{"graphson by reader", func(g *gremlingo.GraphTraversalSource) *gremlingo.GraphTraversal {
			return g.Io("graphson.txt").With("~tinkerpop.io.reader", "graphson").Read()
		}, 2, 1, int32(29), 0.5},
		{"graphml", func(g *gremlingo.GraphTraversalSource) *gremlingo.GraphTraversal { return g.Io("g.xml").Read() }, 3, 2, int32(29), 0.4},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := ioServer(t, dir)
			if res := toList(t, c.read(g)); len(res) != 0 {
				t.Fatalf("read() returned %v, want nothing", res)
			}
			if n := count(t, g.V().Count()); n != c.v {
				t.Errorf("V: %d, want %d", n, c.v)
			}
			if n := count(t, g.E().Count()); n != c.e {
				t.Errorf("E: %d, want %d", n, c.e)
			}
			age := toList(t, g.V().Has("name", "marko").Values("age"))
			if len(age) != 1 || age[0] != c.age {
				t.Errorf("marko's age: %#v, want %#v", age, c.age)
			}
			w := toList(t, g.V().Has("name", "marko").OutE().Values("weight"))
			if len(w) != 1 || w[0] != c.w {
				t.Errorf("weight: %#v, want %#v", w, c.w)
			}
		})
	}
}

// TestIOReadRefused: without an io directory io() is refused with how to
// enable it; paths leaving the directory, write(), Gryo and a file over the
// size limit are refused, and a refused read adds nothing.
func TestIOReadRefused(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	secret := filepath.Join(outside, "secret.json")
	if err := os.WriteFile(secret, []byte(ioGraphSON), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(dir, "link.json")); err != nil {
		t.Fatal(err)
	}
	refused := func(g *gremlingo.GraphTraversalSource, tr *gremlingo.GraphTraversal, want string) {
		t.Helper()
		_, err := tr.ToList()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want an error containing %q", err, want)
		}
		if n := count(t, g.V().Count()); n != 0 {
			t.Errorf("a refused read added %d vertices", n)
		}
	}
	g := ioServer(t, "")
	refused(g, g.Io("g.json").Read(), "start it with -io-dir DIR")

	g = ioServer(t, dir)
	rel, err := filepath.Rel(dir, secret)
	if err != nil {
		t.Fatal(err)
	}
	refused(g, g.Io(secret).Read(), "must be relative")
	refused(g, g.Io(filepath.ToSlash(rel)).Read(), "must not contain '..'")
	refused(g, g.Io("link.json").Read(), "leaves graphd's io directory")
	refused(g, g.Io("missing.json").Read(), "no such file")
	refused(g, g.Io("g.kryo").Read(), "not Gryo (Kryo)")
	refused(g, g.Io("g.json").With("~tinkerpop.io.reader", "gryo").Read(), "not Gryo (Kryo)")
	refused(g, g.Io("g.json").Write(), "never writes files")

	if err := os.WriteFile(filepath.Join(dir, "big.json"), []byte(ioGraphSON), 0o644); err != nil {
		t.Fatal(err)
	}
	small := graphdtest.Start(t, graphdtest.InMemory(), graphdtest.WithConfig(func(c *server.Config) { c.IODir, c.IOMaxBytes = dir, 100 }))
	g = writer(t, small)
	refused(g, g.Io("big.json").Read(), "more than this graphd's limit of 100")
}
