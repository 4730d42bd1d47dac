package graphbinary

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"time"

	"github.com/google/uuid"
)

// Writer appends GraphBinary to a byte slice.
type Writer struct {
	Buf   []byte
	depth int
}

func (w *Writer) u8(b byte) { w.Buf = append(w.Buf, b) }
func (w *Writer) i32(v int32) {
	w.Buf = binary.BigEndian.AppendUint32(w.Buf, uint32(v))
}
func (w *Writer) i64(v int64) {
	w.Buf = binary.BigEndian.AppendUint64(w.Buf, uint64(v))
}

// String writes an unqualified string.
func (w *Writer) String(s string) {
	w.i32(int32(len(s)))
	w.Buf = append(w.Buf, s...)
}

func (w *Writer) null() { w.Buf = append(w.Buf, TypeNull, 0x01) }

// UnsupportedValueError names a value graphd cannot serialize.
type UnsupportedValueError struct{ Value any }

func (e *UnsupportedValueError) Error() string {
	return fmt.Sprintf("graphbinary: cannot serialize value of type %T", e.Value)
}

// Value writes a fully qualified value.
func (w *Writer) Value(v any) error {
	w.depth++
	defer func() { w.depth-- }()
	if w.depth > 512 {
		return fmt.Errorf("graphbinary: value nested too deep")
	}
	switch x := v.(type) {
	case nil:
		w.null()
	case bool:
		w.u8(TypeBoolean)
		w.u8(0)
		if x {
			w.u8(1)
		} else {
			w.u8(0)
		}
	case int:
		w.u8(TypeLong)
		w.u8(0)
		w.i64(int64(x))
	case int64:
		w.u8(TypeLong)
		w.u8(0)
		w.i64(x)
	case int32:
		w.u8(TypeInt)
		w.u8(0)
		w.i32(x)
	case int16:
		w.u8(TypeShort)
		w.u8(0)
		w.Buf = binary.BigEndian.AppendUint16(w.Buf, uint16(x))
	case int8:
		w.u8(TypeShort)
		w.u8(0)
		w.Buf = binary.BigEndian.AppendUint16(w.Buf, uint16(int16(x)))
	case uint8:
		w.u8(TypeByte)
		w.u8(0)
		w.u8(x)
	case float64:
		w.u8(TypeDouble)
		w.u8(0)
		w.i64(int64(math.Float64bits(x)))
	case float32:
		w.u8(TypeFloat)
		w.u8(0)
		w.i32(int32(math.Float32bits(x)))
	case string:
		w.u8(TypeString)
		w.u8(0)
		w.String(x)
	case uuid.UUID:
		w.u8(TypeUUID)
		w.u8(0)
		w.Buf = append(w.Buf, x[:]...)
	case time.Time:
		w.u8(TypeDate)
		w.u8(0)
		w.i64(x.UnixMilli())
	case time.Duration:
		w.u8(TypeDuration)
		w.u8(0)
		w.i64(int64(x / time.Second))
		w.i32(int32(x % time.Second))
	case *big.Int:
		w.u8(TypeBigInteger)
		w.u8(0)
		w.bigInt(x)
	case *BigDecimal:
		w.u8(TypeBigDecimal)
		w.u8(0)
		w.i32(x.Scale)
		w.bigInt(x.Unscaled)
	case []byte:
		w.u8(TypeByteBuffer)
		w.u8(0)
		w.i32(int32(len(x)))
		w.Buf = append(w.Buf, x...)
	case []any:
		w.u8(TypeList)
		w.u8(0)
		return w.list(x)
	case *Set:
		w.u8(TypeSet)
		w.u8(0)
		return w.list(x.Items)
	case *Map:
		w.u8(TypeMap)
		w.u8(0)
		return w.mapBody(x)
	case Enum:
		w.u8(x.Type)
		w.u8(0)
		w.u8(TypeString)
		w.u8(0)
		w.String(x.Name)
	case *Class:
		w.u8(TypeClass)
		w.u8(0)
		w.String(x.Name)
	case *Vertex:
		w.u8(TypeVertex)
		w.u8(0)
		if err := w.Value(x.ID); err != nil {
			return err
		}
		w.String(x.Label)
		if x.Properties == nil {
			w.null()
			return nil
		}
		return w.Value(x.Properties)
	case *Edge:
		w.u8(TypeEdge)
		w.u8(0)
		if err := w.Value(x.ID); err != nil {
			return err
		}
		w.String(x.Label)
		if err := w.Value(x.InID); err != nil {
			return err
		}
		w.String(x.InLabel)
		if err := w.Value(x.OutID); err != nil {
			return err
		}
		w.String(x.OutLabel)
		w.null() // parent
		if x.Properties == nil {
			w.null()
			return nil
		}
		return w.Value(x.Properties)
	case *VertexProperty:
		w.u8(TypeVertexProperty)
		w.u8(0)
		if err := w.Value(x.ID); err != nil {
			return err
		}
		w.String(x.Label)
		if err := w.Value(x.Value); err != nil {
			return err
		}
		w.null() // parent
		if x.Properties == nil {
			w.null()
			return nil
		}
		return w.Value(x.Properties)
	case *Property:
		w.u8(TypeProperty)
		w.u8(0)
		w.String(x.Key)
		if err := w.Value(x.Value); err != nil {
			return err
		}
		w.null() // parent
	case *Path:
		w.u8(TypePath)
		w.u8(0)
		labels := make([]any, len(x.Labels))
		for i, ls := range x.Labels {
			items := make([]any, len(ls))
			for j, l := range ls {
				items[j] = l
			}
			labels[i] = &Set{Items: items}
		}
		if err := w.Value(labels); err != nil {
			return err
		}
		return w.Value(x.Objects)
	case *Traverser:
		w.u8(TypeTraverser)
		w.u8(0)
		w.i64(x.Bulk)
		return w.Value(x.Value)
	case *P:
		if x.Text {
			w.u8(TypeTextP)
		} else {
			w.u8(TypeP)
		}
		w.u8(0)
		w.String(x.Op)
		w.i32(int32(len(x.Values)))
		for _, e := range x.Values {
			if err := w.Value(e); err != nil {
				return err
			}
		}
	case *Strategy:
		w.u8(TypeTraversalStrategy)
		w.u8(0)
		w.String(x.Class)
		return w.mapBody(x.Config)
	case *Binding:
		w.u8(TypeBinding)
		w.u8(0)
		w.String(x.Key)
		return w.Value(x.Value)
	case *Lambda:
		w.u8(TypeLambda)
		w.u8(0)
		w.String(x.Language)
		w.String(x.Script)
		w.i32(x.Args)
	case *Bytecode:
		w.u8(TypeBytecode)
		w.u8(0)
		for _, ins := range [][]Instruction{x.Steps, x.Sources} {
			w.i32(int32(len(ins)))
			for _, in := range ins {
				w.String(in.Op)
				w.i32(int32(len(in.Args)))
				for _, a := range in.Args {
					if err := w.Value(a); err != nil {
						return err
					}
				}
			}
		}
	default:
		return &UnsupportedValueError{Value: v}
	}
	return nil
}

func (w *Writer) list(items []any) error {
	w.i32(int32(len(items)))
	for _, it := range items {
		if err := w.Value(it); err != nil {
			return err
		}
	}
	return nil
}

func (w *Writer) mapBody(m *Map) error {
	if m == nil {
		w.i32(0)
		return nil
	}
	w.i32(int32(len(m.Entries)))
	for _, e := range m.Entries {
		if err := w.Value(e.Key); err != nil {
			return err
		}
		if err := w.Value(e.Value); err != nil {
			return err
		}
	}
	return nil
}

func (w *Writer) bigInt(n *big.Int) {
	var b []byte
	switch n.Sign() {
	case 1:
		b = n.Bytes()
		if b[0]&0x80 != 0 {
			b = append([]byte{0}, b...)
		}
	case -1:
		l := uint(n.BitLen()/8+1) * 8
		b = new(big.Int).Add(n, new(big.Int).Lsh(big.NewInt(1), l)).Bytes()
		if len(b) >= 2 && b[0] == 0xff && b[1]&0x80 != 0 {
			b = b[1:]
		}
	}
	w.i32(int32(len(b)))
	w.Buf = append(w.Buf, b...)
}

// Response status codes used by Gremlin Server.
const (
	StatusSuccess            = 200
	StatusNoContent          = 204
	StatusPartialContent     = 206
	StatusUnauthorized       = 401
	StatusForbidden          = 403
	StatusAuthenticate       = 407
	StatusRequestSerializing = 497
	StatusMalformedRequest   = 498
	StatusInvalidArguments   = 499
	StatusServerError        = 500
	StatusFailStep           = 595
	StatusEvaluation         = 597
	StatusTimeout            = 598
	StatusSerialization      = 599
)

// Response is a response message.
type Response struct {
	RequestID  uuid.UUID
	Code       int32
	Message    string // written only when HasMessage
	HasMessage bool
	Attributes *Map
	Meta       *Map
	Data       any
}

// WriteResponse encodes a response frame. The request id is always written as
// a present (non-null) UUID.
func WriteResponse(resp *Response, buf []byte) ([]byte, error) {
	w := &Writer{Buf: buf}
	w.u8(versionByte)
	w.u8(0) // request id present
	w.Buf = append(w.Buf, resp.RequestID[:]...)
	w.i32(resp.Code)
	if resp.HasMessage {
		w.u8(0)
		w.String(resp.Message)
	} else {
		w.u8(1)
	}
	if err := w.mapBody(resp.Attributes); err != nil {
		return nil, err
	}
	if err := w.mapBody(resp.Meta); err != nil {
		return nil, err
	}
	if err := w.Value(resp.Data); err != nil {
		return nil, err
	}
	return w.Buf, nil
}

// WriteRequest encodes a request frame (used by tests and tools).
func WriteRequest(req *Request) ([]byte, error) {
	w := &Writer{}
	w.u8(byte(len(MimeType)))
	w.Buf = append(w.Buf, MimeType...)
	w.u8(versionByte)
	w.Buf = append(w.Buf, req.ID[:]...)
	w.String(req.Op)
	w.String(req.Processor)
	if err := w.mapBody(req.Args); err != nil {
		return nil, err
	}
	return w.Buf, nil
}
