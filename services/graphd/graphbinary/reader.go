package graphbinary

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
	"time"

	"github.com/google/uuid"
)

// MimeType is the GraphBinary v1 mime type gremlin-go announces.
const MimeType = "application/vnd.graphbinary-v1.0"

const versionByte = 0x81

// MaxDepth bounds nesting of decoded values.
const MaxDepth = 64

// ErrTruncated is returned when input ends early.
var ErrTruncated = errors.New("graphbinary: truncated input")

// UnknownTypeError names a type code graphd cannot read.
type UnknownTypeError struct{ Code byte }

func (e *UnknownTypeError) Error() string {
	return fmt.Sprintf("graphbinary: unknown or unsupported type code 0x%02x", e.Code)
}

// Reader decodes GraphBinary from a byte slice.
type Reader struct {
	buf   []byte
	pos   int
	depth int
}

// NewReader returns a reader over b.
func NewReader(b []byte) *Reader { return &Reader{buf: b} }

// Remaining reports unread bytes.
func (r *Reader) Remaining() int { return len(r.buf) - r.pos }

func (r *Reader) need(n int) error {
	if n < 0 || r.pos+n > len(r.buf) || r.pos+n < r.pos {
		return ErrTruncated
	}
	return nil
}

func (r *Reader) byte1() (byte, error) {
	if err := r.need(1); err != nil {
		return 0, err
	}
	b := r.buf[r.pos]
	r.pos++
	return b, nil
}

func (r *Reader) u32() (uint32, error) {
	if err := r.need(4); err != nil {
		return 0, err
	}
	v := binary.BigEndian.Uint32(r.buf[r.pos:])
	r.pos += 4
	return v, nil
}

func (r *Reader) i32() (int32, error) {
	v, err := r.u32()
	return int32(v), err
}

func (r *Reader) i64() (int64, error) {
	if err := r.need(8); err != nil {
		return 0, err
	}
	v := binary.BigEndian.Uint64(r.buf[r.pos:])
	r.pos += 8
	return int64(v), nil
}

func (r *Reader) bytesN(n int) ([]byte, error) {
	if err := r.need(n); err != nil {
		return nil, err
	}
	b := r.buf[r.pos : r.pos+n]
	r.pos += n
	return b, nil
}

// count reads a non-negative collection length, bounded by the bytes left
// (every element takes at least minSize bytes).
func (r *Reader) count(minSize int) (int, error) {
	n, err := r.i32()
	if err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, fmt.Errorf("graphbinary: negative length %d", n)
	}
	if minSize > 0 && int(n) > r.Remaining()/minSize {
		return 0, ErrTruncated
	}
	return int(n), nil
}

// String reads an unqualified string ({length}{utf8}).
func (r *Reader) String() (string, error) {
	n, err := r.count(1)
	if err != nil {
		return "", err
	}
	b, err := r.bytesN(n)
	return string(b), err
}

// UUID reads 16 bytes.
func (r *Reader) UUID() (uuid.UUID, error) {
	b, err := r.bytesN(16)
	if err != nil {
		return uuid.Nil, err
	}
	var u uuid.UUID
	copy(u[:], b)
	return u, nil
}

// Value reads a fully qualified value: {type}{flag}{value}.
func (r *Reader) Value() (any, error) {
	t, err := r.byte1()
	if err != nil {
		return nil, err
	}
	flag, err := r.byte1()
	if err != nil {
		return nil, err
	}
	if t == TypeNull {
		if flag != 0x01 {
			return nil, errors.New("graphbinary: null type without null flag")
		}
		return nil, nil
	}
	switch flag {
	case 0x00:
	case 0x01:
		return nil, nil
	default:
		return nil, fmt.Errorf("graphbinary: invalid value flag 0x%02x", flag)
	}
	return r.Unqualified(t)
}

// Unqualified reads the value part of type t.
func (r *Reader) Unqualified(t byte) (any, error) {
	r.depth++
	defer func() { r.depth-- }()
	if r.depth > MaxDepth {
		return nil, errors.New("graphbinary: nesting too deep")
	}
	switch t {
	case TypeInt:
		return r.i32()
	case TypeLong:
		return r.i64()
	case TypeString:
		return r.String()
	case TypeDate, TypeTimestamp:
		ms, err := r.i64()
		if err != nil {
			return nil, err
		}
		return time.UnixMilli(ms).UTC(), nil
	case TypeClass:
		s, err := r.String()
		return &Class{Name: s}, err
	case TypeDouble:
		v, err := r.i64()
		return math.Float64frombits(uint64(v)), err
	case TypeFloat:
		v, err := r.u32()
		return math.Float32frombits(v), err
	case TypeList:
		return r.list()
	case TypeSet:
		l, err := r.list()
		if err != nil {
			return nil, err
		}
		return &Set{Items: l}, nil
	case TypeMap:
		return r.mapBody()
	case TypeUUID:
		return r.UUID()
	case TypeVertex:
		id, err := r.Value()
		if err != nil {
			return nil, err
		}
		label, err := r.String()
		if err != nil {
			return nil, err
		}
		props, err := r.Value()
		if err != nil {
			return nil, err
		}
		pl, _ := props.([]any)
		return &Vertex{ID: id, Label: label, Properties: pl}, nil
	case TypeEdge:
		e := &Edge{}
		var err error
		if e.ID, err = r.Value(); err != nil {
			return nil, err
		}
		if e.Label, err = r.String(); err != nil {
			return nil, err
		}
		if e.InID, err = r.Value(); err != nil {
			return nil, err
		}
		if e.InLabel, err = r.String(); err != nil {
			return nil, err
		}
		if e.OutID, err = r.Value(); err != nil {
			return nil, err
		}
		if e.OutLabel, err = r.String(); err != nil {
			return nil, err
		}
		if _, err = r.Value(); err != nil { // parent
			return nil, err
		}
		if _, err = r.Value(); err != nil { // properties
			return nil, err
		}
		return e, nil
	case TypeProperty:
		k, err := r.String()
		if err != nil {
			return nil, err
		}
		v, err := r.Value()
		if err != nil {
			return nil, err
		}
		if _, err = r.Value(); err != nil { // parent
			return nil, err
		}
		return &Property{Key: k, Value: v}, nil
	case TypeVertexProperty:
		vp := &VertexProperty{}
		var err error
		if vp.ID, err = r.Value(); err != nil {
			return nil, err
		}
		if vp.Label, err = r.String(); err != nil {
			return nil, err
		}
		if vp.Value, err = r.Value(); err != nil {
			return nil, err
		}
		if _, err = r.Value(); err != nil { // parent
			return nil, err
		}
		if _, err = r.Value(); err != nil { // properties
			return nil, err
		}
		return vp, nil
	case TypePath:
		labels, err := r.Value()
		if err != nil {
			return nil, err
		}
		objs, err := r.Value()
		if err != nil {
			return nil, err
		}
		p := &Path{}
		if ll, ok := labels.([]any); ok {
			for _, l := range ll {
				var names []string
				if s, ok := l.(*Set); ok {
					for _, x := range s.Items {
						if xs, ok := x.(string); ok {
							names = append(names, xs)
						}
					}
				}
				p.Labels = append(p.Labels, names)
			}
		}
		p.Objects, _ = objs.([]any)
		return p, nil
	case TypeBarrier, TypeCardinality, TypeColumn, TypeDirection, TypeOperator, TypeOrder,
		TypePick, TypePop, TypeScope, TypeT, TypeMerge, TypeDT:
		v, err := r.Value()
		if err != nil {
			return nil, err
		}
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("graphbinary: enum 0x%02x without a string name", t)
		}
		return Enum{Type: t, Name: s}, nil
	case TypeBinding:
		k, err := r.String()
		if err != nil {
			return nil, err
		}
		v, err := r.Value()
		if err != nil {
			return nil, err
		}
		return &Binding{Key: k, Value: v}, nil
	case TypeBytecode:
		return r.bytecode()
	case TypeLambda:
		lang, err := r.String()
		if err != nil {
			return nil, err
		}
		script, err := r.String()
		if err != nil {
			return nil, err
		}
		n, err := r.i32()
		if err != nil {
			return nil, err
		}
		return &Lambda{Language: lang, Script: script, Args: n}, nil
	case TypeP, TypeTextP:
		op, err := r.String()
		if err != nil {
			return nil, err
		}
		n, err := r.count(2)
		if err != nil {
			return nil, err
		}
		vals := make([]any, 0, n)
		for i := 0; i < n; i++ {
			v, err := r.Value()
			if err != nil {
				return nil, err
			}
			vals = append(vals, v)
		}
		return &P{Op: op, Values: vals, Text: t == TypeTextP}, nil
	case TypeTraverser:
		bulk, err := r.i64()
		if err != nil {
			return nil, err
		}
		v, err := r.Value()
		if err != nil {
			return nil, err
		}
		return &Traverser{Bulk: bulk, Value: v}, nil
	case TypeBigInteger:
		return r.bigInt()
	case TypeBigDecimal:
		scale, err := r.i32()
		if err != nil {
			return nil, err
		}
		bi, err := r.bigInt()
		if err != nil {
			return nil, err
		}
		return &BigDecimal{Scale: scale, Unscaled: bi}, nil
	case TypeByte:
		return r.byte1()
	case TypeByteBuffer:
		n, err := r.count(1)
		if err != nil {
			return nil, err
		}
		b, err := r.bytesN(n)
		if err != nil {
			return nil, err
		}
		return append([]byte(nil), b...), nil
	case TypeShort:
		b, err := r.bytesN(2)
		if err != nil {
			return nil, err
		}
		return int16(binary.BigEndian.Uint16(b)), nil
	case TypeBoolean:
		b, err := r.byte1()
		return b != 0, err
	case TypeTraversalStrategy:
		class, err := r.String()
		if err != nil {
			return nil, err
		}
		m, err := r.mapBody()
		if err != nil {
			return nil, err
		}
		return &Strategy{Class: class, Config: m}, nil
	case TypeBulkSet:
		n, err := r.count(10)
		if err != nil {
			return nil, err
		}
		var out []any
		for i := 0; i < n; i++ {
			v, err := r.Value()
			if err != nil {
				return nil, err
			}
			rep, err := r.i64()
			if err != nil {
				return nil, err
			}
			if rep < 0 || rep > int64(r.Remaining()+1)*1024 || len(out)+int(rep) > 1<<20 {
				return nil, errors.New("graphbinary: bulk set too large")
			}
			for k := int64(0); k < rep; k++ {
				out = append(out, v)
			}
		}
		return out, nil
	case TypeDuration:
		s, err := r.i64()
		if err != nil {
			return nil, err
		}
		n, err := r.i32()
		if err != nil {
			return nil, err
		}
		return time.Duration(s)*time.Second + time.Duration(n), nil
	}
	return nil, &UnknownTypeError{Code: t}
}

func (r *Reader) list() ([]any, error) {
	n, err := r.count(2)
	if err != nil {
		return nil, err
	}
	out := make([]any, 0, n)
	for i := 0; i < n; i++ {
		v, err := r.Value()
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func (r *Reader) mapBody() (*Map, error) {
	n, err := r.count(4)
	if err != nil {
		return nil, err
	}
	m := &Map{Entries: make([]MapEntry, 0, n)}
	for i := 0; i < n; i++ {
		k, err := r.Value()
		if err != nil {
			return nil, err
		}
		v, err := r.Value()
		if err != nil {
			return nil, err
		}
		m.Entries = append(m.Entries, MapEntry{Key: k, Value: v})
	}
	return m, nil
}

func (r *Reader) bigInt() (*big.Int, error) {
	n, err := r.count(1)
	if err != nil {
		return nil, err
	}
	b, err := r.bytesN(n)
	if err != nil {
		return nil, err
	}
	v := new(big.Int).SetBytes(b)
	if n > 0 && b[0]&0x80 != 0 {
		v.Sub(v, new(big.Int).Lsh(big.NewInt(1), uint(8*n)))
	}
	return v, nil
}

func (r *Reader) instructions() ([]Instruction, error) {
	n, err := r.count(8)
	if err != nil {
		return nil, err
	}
	out := make([]Instruction, 0, n)
	for i := 0; i < n; i++ {
		name, err := r.String()
		if err != nil {
			return nil, err
		}
		na, err := r.count(2)
		if err != nil {
			return nil, err
		}
		args := make([]any, 0, na)
		for j := 0; j < na; j++ {
			v, err := r.Value()
			if err != nil {
				return nil, err
			}
			args = append(args, v)
		}
		out = append(out, Instruction{Op: name, Args: args})
	}
	return out, nil
}

func (r *Reader) bytecode() (*Bytecode, error) {
	steps, err := r.instructions()
	if err != nil {
		return nil, err
	}
	sources, err := r.instructions()
	if err != nil {
		return nil, err
	}
	return &Bytecode{Steps: steps, Sources: sources}, nil
}

// Request is a decoded request message.
type Request struct {
	ID        uuid.UUID
	Op        string
	Processor string
	Args      *Map
}

// Arg returns a string-keyed argument.
func (q *Request) Arg(name string) (any, bool) { return q.Args.Get(name) }

// RequestIDError is returned when even the request id could not be read.
type RequestIDError struct{ Err error }

func (e *RequestIDError) Error() string {
	return "graphbinary: unreadable request header: " + e.Err.Error()
}
func (e *RequestIDError) Unwrap() error { return e.Err }

// ReadRequest decodes a whole request frame. If the returned error is not a
// *RequestIDError, req.ID is valid and can be used to answer.
func ReadRequest(frame []byte) (req *Request, err error) {
	defer func() {
		if p := recover(); p != nil { // belt and braces: the reader must never take the server down
			err = fmt.Errorf("graphbinary: malformed request: %v", p)
		}
	}()
	r := NewReader(frame)
	req = &Request{}
	ml, err := r.byte1()
	if err != nil {
		return req, &RequestIDError{err}
	}
	mime, err := r.bytesN(int(ml))
	if err != nil {
		return req, &RequestIDError{err}
	}
	if string(mime) != MimeType {
		return req, &RequestIDError{fmt.Errorf("unsupported mime type %q", string(mime))}
	}
	ver, err := r.byte1()
	if err != nil {
		return req, &RequestIDError{err}
	}
	if ver != versionByte {
		return req, &RequestIDError{fmt.Errorf("unsupported version byte 0x%02x", ver)}
	}
	if req.ID, err = r.UUID(); err != nil {
		return req, &RequestIDError{err}
	}
	if req.Op, err = r.String(); err != nil {
		return req, err
	}
	if req.Processor, err = r.String(); err != nil {
		return req, err
	}
	n, err := r.count(4)
	if err != nil {
		return req, err
	}
	req.Args = &Map{}
	for i := 0; i < n; i++ {
		k, err := r.Value()
		if err != nil {
			return req, err
		}
		v, err := r.Value()
		if err != nil {
			return req, err
		}
		req.Args.Entries = append(req.Args.Entries, MapEntry{Key: k, Value: v})
	}
	if r.Remaining() != 0 {
		return req, fmt.Errorf("graphbinary: %d trailing bytes after request", r.Remaining())
	}
	return req, nil
}
