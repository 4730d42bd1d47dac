package traversal

import (
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/worldgate/worldgate/services/graphd/graph"
	"github.com/worldgate/worldgate/services/graphd/graphio"
)

// Files opens the files io(path).read() reads; *os.Root is one (it keeps
// every path, symbolic links included, inside its directory).
type Files interface {
	Open(name string) (*os.File, error)
}

// IO's with() keys and values (TinkerPop's IO class).
const (
	ioReader   = "~tinkerpop.io.reader"
	ioWriter   = "~tinkerpop.io.writer"
	ioAction   = "~graphd.io.action" // read() or write() after io(), kept with the with() options
	ioGraphSON = "graphson"
	ioGraphML  = "graphml"
	ioGryo     = "gryo"
)

// setIOAction records read()/write() on the io() step before them.
func setIOAction(prev *step, op string, args []any) error {
	if prev == nil || prev.op != "io" {
		return evalErr("%s() must follow io(path)", op)
	}
	if len(args) != 0 {
		return evalErr("%s() takes no arguments", op)
	}
	if op == "write" {
		return evalErr("io(path).write() is not supported by graphd: it never writes files on the server's disk (read the graph with a traversal instead)")
	}
	m := prev.setMods()
	if m.with == nil {
		m.with = map[string]any{}
	}
	m.with[ioAction] = op
	return nil
}

// runIO is io(path).read(): the graph file at path, inside the server's io
// directory, added to the graph. It yields nothing.
func runIO(ec *execCtx, s *step, _ []*trav) ([]*trav, error) {
	with := s.mods().with
	if with[ioAction] != "read" {
		return nil, evalErr("io(path) must be followed by read() or write()")
	}
	if !s.rootStart {
		return nil, evalErr("io() can only start a traversal (g.io(path).read())")
	}
	if len(s.args) != 1 {
		return nil, evalErr("io() takes one path")
	}
	name, ok := s.args[0].(string)
	if !ok {
		return nil, evalErr("io() takes a path (a string), got %s", describe(s.args[0]))
	}
	if _, ok := with[ioWriter]; ok {
		return nil, evalErr("io(path).with(IO.writer, ...) has no meaning for read()")
	}
	format, err := ioFormat(name, with[ioReader])
	if err != nil {
		return nil, err
	}
	if ec.files == nil {
		return nil, evalErr("io(path).read() is not enabled on this graphd: start it with -io-dir DIR (WORLDGATE_GRAPHD_IO_DIR) to read graph files from inside DIR")
	}
	if err := localPath(name); err != nil {
		return nil, err
	}
	f, err := ec.files.Open(filepath.FromSlash(name))
	if err != nil {
		return nil, evalErr("io('%s').read(): %s", name, openProblem(err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, evalErr("io('%s').read(): %v", name, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, evalErr("io('%s').read(): not a regular file", name)
	}
	var r io.Reader = f
	if ec.maxFileBytes > 0 {
		if fi.Size() > ec.maxFileBytes {
			return nil, evalErr("io('%s').read(): the file has %d bytes, more than this graphd's limit of %d", name, fi.Size(), ec.maxFileBytes)
		}
		r = io.LimitReader(f, ec.maxFileBytes)
	}
	var gr *graphio.Graph
	if format == ioGraphML {
		gr, err = graphio.ReadGraphML(r)
	} else {
		gr, err = graphio.ReadGraphSON(r)
	}
	if err != nil {
		return nil, evalErr("io('%s').read(): %v", name, err)
	}
	tx, err := ec.mut()
	if err != nil {
		return nil, err
	}
	if err := ec.addGraph(tx, gr); err != nil {
		return nil, evalErr("io('%s').read(): %v", name, err)
	}
	return nil, nil
}

// ioFormat is the reader with(IO.reader, ...) names, or the one the file's
// extension names as TinkerPop's IoStep picks it.
func ioFormat(name string, reader any) (string, error) {
	if reader != nil {
		r, _ := reader.(string)
		switch r {
		case ioGraphSON, ioGraphML:
			return r, nil
		case ioGryo:
			return "", evalErr("io(path).with(IO.reader, IO.gryo) is not supported by graphd: it reads GraphSON 3 and GraphML, not Gryo (Kryo)")
		}
		return "", evalErr("io(path).with(IO.reader, %s) is not supported by graphd: it reads IO.graphson and IO.graphml", describe(reader))
	}
	switch strings.ToLower(path.Ext(name)) {
	case ".json":
		return ioGraphSON, nil
	case ".xml":
		return ioGraphML, nil
	case ".kryo":
		return "", evalErr("io('%s').read() is not supported by graphd: it reads GraphSON 3 (.json) and GraphML (.xml), not Gryo (Kryo)", name)
	}
	return "", evalErr("io('%s').read(): cannot tell the format from the extension; use .json (GraphSON) or .xml (GraphML), or with(IO.reader, IO.graphson or IO.graphml)", name)
}

// localPath refuses a path that could leave the io directory (the Files'
// own checks, symbolic links included, come after this).
func localPath(name string) error {
	if name == "" || path.IsAbs(name) || filepath.IsAbs(name) || strings.HasPrefix(name, `\`) || filepath.VolumeName(name) != "" {
		return evalErr("io('%s').read(): the path must be relative to graphd's io directory", name)
	}
	for _, part := range strings.FieldsFunc(name, func(r rune) bool { return r == '/' || r == '\\' }) {
		if part == ".." {
			return evalErr("io('%s').read(): the path must not contain '..' (it is read inside graphd's io directory)", name)
		}
	}
	return nil
}

func openProblem(err error) string {
	if os.IsNotExist(err) {
		return "no such file in graphd's io directory"
	}
	if strings.Contains(err.Error(), "escapes") {
		return "the path leaves graphd's io directory (through a symbolic link)"
	}
	return err.Error()
}

// addGraph adds a file's vertices and edges as TinkerGraph would: the ids the
// file gives (an id already in the graph is an error), list cardinality.
func (ec *execCtx) addGraph(tx *graph.Tx, gr *graphio.Graph) error {
	for _, v := range gr.Vertices {
		id, err := graph.NormalizeID(v.ID)
		if err != nil {
			return fmt.Errorf("vertex id %v: %w", v.ID, err)
		}
		nv, err := ec.g.AddVertex(tx, id, v.Label)
		if err != nil {
			return fmt.Errorf("vertex %v: %w", v.ID, err)
		}
		for _, p := range v.Props {
			var pid any
			if p.ID != nil {
				if pid, err = graph.NormalizeID(p.ID); err != nil {
					return fmt.Errorf("vertex %v property %s id: %w", v.ID, p.Key, err)
				}
			}
			if _, err := ec.g.SetVertexPropertyMeta(tx, nv, graph.List, p.Key, p.Value, pid, p.Meta); err != nil {
				return fmt.Errorf("vertex %v property %s: %w", v.ID, p.Key, err)
			}
		}
	}
	for _, e := range gr.Edges {
		var id any
		if e.ID != nil {
			var err error
			if id, err = graph.NormalizeID(e.ID); err != nil {
				return fmt.Errorf("edge id %v: %w", e.ID, err)
			}
		}
		out, in := ec.fileVertex(e.Out), ec.fileVertex(e.In)
		if out == nil || in == nil {
			return fmt.Errorf("edge %v joins vertex %v and vertex %v, and one of them is not in the file", e.ID, e.Out, e.In)
		}
		ne, err := ec.g.AddEdge(tx, id, e.Label, out, in)
		if err != nil {
			return fmt.Errorf("edge %v: %w", e.ID, err)
		}
		for _, p := range e.Props {
			if err := ec.g.SetEdgeProperty(tx, ne, p[0].(string), p[1]); err != nil {
				return fmt.Errorf("edge %v property %v: %w", e.ID, p[0], err)
			}
		}
	}
	return nil
}

func (ec *execCtx) fileVertex(id any) *graph.Vertex {
	n, err := graph.NormalizeID(id)
	if err != nil {
		return nil
	}
	return ec.g.Vertex(n)
}
