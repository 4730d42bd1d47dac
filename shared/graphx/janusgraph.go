package graphx

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"

	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"
)

// JanusGraphRelationIdentifier is the GraphBinary custom type name of JanusGraph's edge ids.
const JanusGraphRelationIdentifier = "janusgraph.RelationIdentifier"

// janusRelationIdentifierCode is the custom type info JanusGraph writes before the value.
const janusRelationIdentifierCode = 0x1001

// RelationIdentifier is a JanusGraph edge (relation) id. Vertex ids are int64 or, with custom
// string vertex ids enabled, string. Worldgate never relies on edge ids (edges are found by
// endpoints and label); it only has to be able to read a response that contains one.
type RelationIdentifier struct {
	OutVertexID any // int64 or string
	TypeID      int64
	RelationID  int64
	InVertexID  any // int64, string, or nil (a property's relation has no in-vertex)
}

// String is JanusGraph's textual form: relationId-outVertexId-typeId-inVertexId in base 36.
func (r RelationIdentifier) String() string {
	id := func(v any) string {
		switch x := v.(type) {
		case int64:
			return strconv.FormatInt(x, 36)
		case string:
			return x
		}
		return "0"
	}
	s := strconv.FormatInt(r.RelationID, 36) + "-" + id(r.OutVertexID) + "-" + strconv.FormatInt(r.TypeID, 36)
	if r.InVertexID != nil {
		s += "-" + id(r.InVertexID)
	}
	return s
}

var registerOnce sync.Once

// RegisterJanusGraphTypes registers the GraphBinary reader for janusgraph.RelationIdentifier
// with gremlin-go (a process-wide registry). Open calls it; it is safe to call again.
func RegisterJanusGraphTypes() {
	registerOnce.Do(func() {
		gremlingo.RegisterCustomTypeReader(JanusGraphRelationIdentifier, ReadRelationIdentifier)
	})
}

var errShort = errors.New("janusgraph.RelationIdentifier: truncated value")

// ReadRelationIdentifier decodes the value part of a janusgraph.RelationIdentifier custom type
// (after its name): {int32 0x1001}{value flag}{out id}{long typeId}{long relationId}{in id},
// where each vertex id is a marker byte (0 long, 1 string) followed by a long or a string of
// 7-bit characters whose last byte has the high bit set (JanusGraph 1.x's encoding).
func ReadRelationIdentifier(data *[]byte, i *int) (any, error) {
	b := *data
	need := func(n int) error {
		if *i+n > len(b) {
			return errShort
		}
		return nil
	}
	readLong := func() (int64, error) {
		if err := need(8); err != nil {
			return 0, err
		}
		v := int64(binary.BigEndian.Uint64(b[*i:]))
		*i += 8
		return v, nil
	}
	readByte := func() (byte, error) {
		if err := need(1); err != nil {
			return 0, err
		}
		v := b[*i]
		*i++
		return v, nil
	}
	readID := func() (any, error) {
		marker, err := readByte()
		if err != nil {
			return nil, err
		}
		if marker != 1 {
			return readLong()
		}
		var s []byte
		for {
			c, err := readByte()
			if err != nil {
				return nil, err
			}
			s = append(s, c&0x7f)
			if c&0x80 != 0 {
				return string(s), nil
			}
		}
	}
	if err := need(4); err != nil {
		return nil, err
	}
	if code := binary.BigEndian.Uint32(b[*i:]); code != janusRelationIdentifierCode {
		return nil, fmt.Errorf("janusgraph.RelationIdentifier: type info 0x%x, want 0x%x", code, janusRelationIdentifierCode)
	}
	*i += 4
	flag, err := readByte()
	if err != nil {
		return nil, err
	}
	if flag&1 == 1 {
		return nil, nil
	}
	var r RelationIdentifier
	if r.OutVertexID, err = readID(); err != nil {
		return nil, err
	}
	if r.TypeID, err = readLong(); err != nil {
		return nil, err
	}
	if r.RelationID, err = readLong(); err != nil {
		return nil, err
	}
	if r.InVertexID, err = readID(); err != nil {
		return nil, err
	}
	if n, ok := r.InVertexID.(int64); ok && n == 0 {
		r.InVertexID = nil
	}
	return r, nil
}
