// Package graphbinary implements the subset of Apache TinkerPop's GraphBinary
// v1 format that graphd needs: reading request messages (including bytecode,
// predicates, enums and strategies exactly as gremlin-go v3.7 writes them) and
// writing response messages and result values exactly as gremlin-go reads them.
//
// The reader is defensive: every length is checked against the remaining input,
// nesting depth is bounded, and no input can make it panic (see the fuzz test).
package graphbinary

import (
	"fmt"
	"math/big"
	"strings"
)

// Type codes (GraphBinary v1), mirrored from gremlin-go's graphBinary.go.
const (
	TypeCustom            byte = 0x00
	TypeInt               byte = 0x01
	TypeLong              byte = 0x02
	TypeString            byte = 0x03
	TypeDate              byte = 0x04
	TypeTimestamp         byte = 0x05
	TypeClass             byte = 0x06
	TypeDouble            byte = 0x07
	TypeFloat             byte = 0x08
	TypeList              byte = 0x09
	TypeMap               byte = 0x0a
	TypeSet               byte = 0x0b
	TypeUUID              byte = 0x0c
	TypeEdge              byte = 0x0d
	TypePath              byte = 0x0e
	TypeProperty          byte = 0x0f
	TypeVertex            byte = 0x11
	TypeVertexProperty    byte = 0x12
	TypeBarrier           byte = 0x13
	TypeBinding           byte = 0x14
	TypeBytecode          byte = 0x15
	TypeCardinality       byte = 0x16
	TypeColumn            byte = 0x17
	TypeDirection         byte = 0x18
	TypeOperator          byte = 0x19
	TypeOrder             byte = 0x1a
	TypePick              byte = 0x1b
	TypePop               byte = 0x1c
	TypeLambda            byte = 0x1d
	TypeP                 byte = 0x1e
	TypeScope             byte = 0x1f
	TypeT                 byte = 0x20
	TypeTraverser         byte = 0x21
	TypeBigDecimal        byte = 0x22
	TypeBigInteger        byte = 0x23
	TypeByte              byte = 0x24
	TypeByteBuffer        byte = 0x25
	TypeShort             byte = 0x26
	TypeBoolean           byte = 0x27
	TypeTextP             byte = 0x28
	TypeTraversalStrategy byte = 0x29
	TypeBulkSet           byte = 0x2a
	TypeMetrics           byte = 0x2c
	TypeTraversalMetrics  byte = 0x2d
	TypeMerge             byte = 0x2e
	TypeDT                byte = 0x2f
	TypeDuration          byte = 0x81
	TypeNull              byte = 0xfe
)

// Bytecode is a decoded traversal: step and source instructions.
type Bytecode struct {
	Steps   []Instruction
	Sources []Instruction
}

// Instruction is one bytecode operator with its arguments.
type Instruction struct {
	Op   string
	Args []any
}

// String renders bytecode roughly as Gremlin for error messages.
func (b *Bytecode) String() string {
	var sb strings.Builder
	sb.WriteString("g")
	for _, in := range append(append([]Instruction{}, b.Sources...), b.Steps...) {
		sb.WriteString(".")
		sb.WriteString(in.Op)
		sb.WriteString("(")
		for i, a := range in.Args {
			if i > 0 {
				sb.WriteString(",")
			}
			if nb, ok := a.(*Bytecode); ok {
				sb.WriteString("__" + strings.TrimPrefix(nb.String(), "g"))
			} else {
				fmt.Fprintf(&sb, "%v", a)
			}
		}
		sb.WriteString(")")
	}
	return sb.String()
}

// Enum is any GraphBinary enum value (T, Direction, Order, Scope, ...).
type Enum struct {
	Type byte
	Name string
}

func (e Enum) String() string { return e.Name }

// P is a predicate (P or TextP).
type P struct {
	Op     string
	Values []any
	Text   bool
}

func (p *P) String() string { return fmt.Sprintf("%s(%v)", p.Op, p.Values) }

// Strategy is a traversal strategy with its configuration.
type Strategy struct {
	Class  string
	Config *Map
}

// Lambda is a lambda; graphd refuses to execute lambdas.
type Lambda struct {
	Language, Script string
	Args             int32
}

// Binding is a named value.
type Binding struct {
	Key   string
	Value any
}

// BigDecimal is an arbitrary-precision decimal.
type BigDecimal struct {
	Scale    int32
	Unscaled *big.Int
}

// Class is a Java class name.
type Class struct{ Name string }

// MapEntry is one key/value of a Map.
type MapEntry struct {
	Key, Value any
}

// Map is an insertion-ordered map that tolerates keys Go cannot hash.
type Map struct {
	Entries []MapEntry
}

// Get returns the value for a key compared with Equal.
func (m *Map) Get(k any) (any, bool) {
	if m == nil {
		return nil, false
	}
	for _, e := range m.Entries {
		if Equal(e.Key, k) {
			return e.Value, true
		}
	}
	return nil, false
}

// Set is a set of values (kept as a list).
type Set struct {
	Items []any
}

// Vertex as it travels on the wire.
type Vertex struct {
	ID         any
	Label      string
	Properties []any // nil is written as null
}

// Edge as it travels on the wire.
type Edge struct {
	ID                any
	Label             string
	InID, OutID       any
	InLabel, OutLabel string
	Properties        []any
}

// VertexProperty as it travels on the wire.
type VertexProperty struct {
	ID         any
	Label      string
	Value      any
	Properties []any
}

// Property as it travels on the wire.
type Property struct {
	Key   string
	Value any
}

// Path as it travels on the wire.
type Path struct {
	Labels  [][]string
	Objects []any
}

// Traverser is a value with a bulk.
type Traverser struct {
	Bulk  int64
	Value any
}

// Equal compares two decoded values structurally (numbers by value, maps and
// lists element-wise). It never panics.
func Equal(a, b any) bool {
	if na, ok := toNumber(a); ok {
		if nb, ok := toNumber(b); ok {
			return na.Cmp(nb) == 0
		}
		return false
	}
	switch x := a.(type) {
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !Equal(x[i], y[i]) {
				return false
			}
		}
		return true
	case *Map:
		y, ok := b.(*Map)
		if !ok || len(x.Entries) != len(y.Entries) {
			return false
		}
		for _, e := range x.Entries {
			v, ok := y.Get(e.Key)
			if !ok || !Equal(e.Value, v) {
				return false
			}
		}
		return true
	case *Set:
		y, ok := b.(*Set)
		if !ok || len(x.Items) != len(y.Items) {
			return false
		}
		for _, e := range x.Items {
			found := false
			for _, f := range y.Items {
				if Equal(e, f) {
					found = true
					break
				}
			}
			if !found {
				return false
			}
		}
		return true
	case []byte:
		y, ok := b.([]byte)
		return ok && string(x) == string(y)
	case *P, *Bytecode, *Strategy, *Lambda, *BigDecimal:
		return a == b
	}
	defer func() { _ = recover() }() // uncomparable dynamic types compare unequal
	return a == b
}

// toNumber converts any numeric value to a big.Float for comparison.
func toNumber(v any) (*big.Float, bool) {
	switch n := v.(type) {
	case int:
		return new(big.Float).SetInt64(int64(n)), true
	case int8:
		return new(big.Float).SetInt64(int64(n)), true
	case int16:
		return new(big.Float).SetInt64(int64(n)), true
	case int32:
		return new(big.Float).SetInt64(int64(n)), true
	case int64:
		return new(big.Float).SetInt64(n), true
	case uint8:
		return new(big.Float).SetInt64(int64(n)), true
	case float32:
		f := float64(n)
		if f != f || f > 1e308 || f < -1e308 {
			return nil, false
		}
		return new(big.Float).SetFloat64(f), true
	case float64:
		if n != n || n > 1.7e308 || n < -1.7e308 {
			return nil, false
		}
		return new(big.Float).SetFloat64(n), true
	case *big.Int:
		if n == nil {
			return nil, false
		}
		return new(big.Float).SetInt(n), true
	}
	return nil, false
}
