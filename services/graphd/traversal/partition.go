package traversal

import (
	"github.com/worldgate/worldgate/services/graphd/graph"
	gb "github.com/worldgate/worldgate/services/graphd/graphbinary"
)

// partition is PartitionStrategy: elements carry a partition key; the
// traversal reads only the elements (and, with includeMetaProperties, the
// vertex properties) whose partition is one of readPartitions, wherever
// V(), E(), the adjacency and edge-vertex steps produce them; addV()/addE()
// write writePartition, and mergeV()/mergeE() search and create in it.
type partition struct {
	key, write   string
	read         map[any]bool
	includeMetas bool
}

func newPartition(cfg *gb.Map) (*partition, error) {
	p := &partition{read: map[any]bool{}}
	if cfg == nil {
		return nil, evalErr("PartitionStrategy needs a partitionKey")
	}
	for _, e := range cfg.Entries {
		k, _ := e.Key.(string)
		switch k {
		case "partitionKey", "writePartition":
			s, ok := e.Value.(string)
			if !ok {
				return nil, evalErr("PartitionStrategy: %s must be a string", k)
			}
			if k == "partitionKey" {
				p.key = s
			} else {
				p.write = s
			}
		case "readPartitions":
			l, ok := asList(e.Value)
			if !ok {
				return nil, evalErr("PartitionStrategy: readPartitions must be a list or set")
			}
			for _, r := range l {
				p.read[canon(r)] = true
			}
		case "includeMetaProperties":
			b, ok := e.Value.(bool)
			if !ok {
				return nil, evalErr("PartitionStrategy: includeMetaProperties must be a boolean")
			}
			p.includeMetas = b
		default:
			return nil, evalErr("PartitionStrategy: unknown option %q", k)
		}
	}
	if p.key == "" {
		return nil, evalErr("PartitionStrategy needs a partitionKey")
	}
	return p, nil
}

// readable reports whether an element (or vertex property) is in a read
// partition.
func (p *partition) readable(o any) bool {
	for _, v := range propValues(o, p.key) {
		if p.read[canon(v)] {
			return true
		}
	}
	return false
}

// stamp writes the write partition onto a new element.
func (ec *execCtx) stamp(tx *graph.Tx, o any) error {
	p := ec.part
	if p == nil || p.write == "" {
		return nil
	}
	switch x := o.(type) {
	case *graph.Vertex:
		if _, err := ec.g.SetVertexProperty(tx, x, graph.Single, p.key, p.write); err != nil {
			return evalErr("%v", err)
		}
	case *graph.Edge:
		if err := ec.g.SetEdgeProperty(tx, x, p.key, p.write); err != nil {
			return evalErr("%v", err)
		}
	}
	return nil
}

// inWritePartition adds the partition key to a mergeV()/mergeE() map.
func (ec *execCtx) inWritePartition(m *gb.Map) *gb.Map {
	p := ec.part
	if p == nil || p.write == "" {
		return m
	}
	out := &gb.Map{Entries: make([]gb.MapEntry, 0, len(m.Entries)+1)}
	for _, e := range m.Entries {
		if e.Key != p.key {
			out.Entries = append(out.Entries, e)
		}
	}
	out.Entries = append(out.Entries, gb.MapEntry{Key: p.key, Value: p.write})
	return out
}

// filtering reports whether a strategy filters what the traversal reads.
func (ec *execCtx) filtering() bool { return ec.sub != nil || ec.part != nil }
