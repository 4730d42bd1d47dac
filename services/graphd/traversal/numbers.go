package traversal

import (
	"math"
	"math/big"
	"strconv"
	"strings"

	gb "github.com/worldgate/worldgate/services/graphd/graphbinary"
)

// Number arithmetic with TinkerPop's NumberHelper rules: an operation on two
// numbers is done in the "highest common class" of the two, chosen by the
// widest bit size and whether either is floating point:
//
//	Byte(8) Short(16) Integer(32) Long(64) BigInteger(128)   integral
//	Float(32) Double(64) BigDecimal(128)                     floating point
//
// so Integer+Long is a Long, Integer+Double a Double, Float+Long a Double,
// Long+BigDecimal a BigDecimal. Go types: Byte uint8 (as gremlin-go and the
// wire carry it), Short int16, Integer int32, Long int64 (and int),
// BigInteger *big.Int, Float float32, Double float64, BigDecimal
// *gb.BigDecimal.
//
// Where Java would silently wrap a Byte, Short or Integer result that
// overflows, graphd gives the value in the next class that holds it (an
// Integer sum past 2^31 is a Long), so no answer is a wrapped number.

type numClass int

const (
	ncByte numClass = iota
	ncShort
	ncInt
	ncLong
	ncBigInt
	ncFloat
	ncDouble
	ncBigDec
)

// classBits returns the bit size and floating-point flag of a number.
func classBits(v any) (bits int, fp, ok bool) {
	switch v.(type) {
	case uint8, int8:
		return 8, false, true
	case int16:
		return 16, false, true
	case int32:
		return 32, false, true
	case int64, int:
		return 64, false, true
	case *big.Int:
		return 128, false, true
	case float32:
		return 32, true, true
	case float64:
		return 64, true, true
	case *gb.BigDecimal:
		return 128, true, true
	}
	return 0, false, false
}

// commonClass is NumberHelper.getHighestCommonNumberClass.
func commonClass(forceFP bool, vs ...any) numClass {
	bits, fp := 8, forceFP
	for _, v := range vs {
		b, f, ok := classBits(v)
		if !ok {
			continue
		}
		bits = max(bits, b)
		fp = fp || f
	}
	if fp {
		switch {
		case bits <= 32:
			return ncFloat
		case bits <= 64:
			return ncDouble
		}
		return ncBigDec
	}
	switch {
	case bits <= 8:
		return ncByte
	case bits <= 16:
		return ncShort
	case bits <= 32:
		return ncInt
	case bits <= 64:
		return ncLong
	}
	return ncBigInt
}

func bigIntOf(v any) *big.Int {
	if b, ok := v.(*big.Int); ok {
		return b
	}
	if n, ok := toInt64(v); ok {
		return big.NewInt(n)
	}
	f, _ := toFloat(v)
	b, _ := big.NewFloat(f).Int(nil)
	return b
}

// bigRatOf is a number's exact value (floats by their shortest decimal, as
// Java's BigDecimal.valueOf(double) takes them).
func bigRatOf(v any) *big.Rat {
	switch x := v.(type) {
	case *gb.BigDecimal:
		return decRat(x)
	case *big.Int:
		return new(big.Rat).SetInt(x)
	case float32:
		if d, ok := javaDecimal(javaDouble(float64(x), 32)); ok {
			return decRat(d)
		}
		return new(big.Rat)
	case float64:
		if d, ok := javaDecimal(javaDouble(x, 64)); ok {
			return decRat(d)
		}
		return new(big.Rat)
	}
	n, _ := toInt64(v)
	return new(big.Rat).SetInt64(n)
}

func decRat(d *gb.BigDecimal) *big.Rat {
	u := d.Unscaled
	if u == nil {
		u = new(big.Int)
	}
	r := new(big.Rat).SetInt(u)
	if d.Scale > 0 {
		return r.Quo(r, new(big.Rat).SetInt(pow10(int(d.Scale))))
	}
	if d.Scale < 0 {
		return r.Mul(r, new(big.Rat).SetInt(pow10(int(-d.Scale))))
	}
	return r
}

func pow10(n int) *big.Int { return new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n)), nil) }

// decScale is a BigDecimal's scale (0 for other numbers, as
// BigDecimal.valueOf(long) has none; a double's is its shortest decimal's).
func decScale(v any) int32 {
	switch x := v.(type) {
	case *gb.BigDecimal:
		return x.Scale
	case float32:
		if d, ok := javaDecimal(javaDouble(float64(x), 32)); ok {
			return d.Scale
		}
	case float64:
		if d, ok := javaDecimal(javaDouble(x, 64)); ok {
			return d.Scale
		}
	}
	return 0
}

// ratDecimal turns an exact rational into a BigDecimal when its decimal
// expansion terminates (at the smallest scale that holds it).
func ratDecimal(r *big.Rat) (*gb.BigDecimal, bool) {
	den := new(big.Int).Set(r.Denom())
	two, five, m := big.NewInt(2), big.NewInt(5), new(big.Int)
	n2, n5 := 0, 0
	for new(big.Int).Mod(den, two).Sign() == 0 {
		den.Quo(den, two)
		n2++
	}
	for m.Mod(den, five).Sign() == 0 {
		den.Quo(den, five)
		n5++
	}
	if den.Cmp(big.NewInt(1)) != 0 {
		return nil, false
	}
	scale := max(n2, n5)
	u := new(big.Int).Mul(r.Num(), pow10(scale))
	u.Quo(u, r.Denom())
	return &gb.BigDecimal{Scale: int32(scale), Unscaled: u}, true
}

// javaDecimal is BigDecimal.valueOf(double): the digits of Java's
// Double.toString, with their scale ("2.0" has scale 1).
func javaDecimal(s string) (*gb.BigDecimal, bool) {
	exp := 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.Atoi(s[i+1:])
		if err != nil {
			return nil, false
		}
		exp, s = e, s[:i]
	}
	scale := 0
	if i := strings.IndexByte(s, '.'); i >= 0 {
		scale = len(s) - i - 1
		s = s[:i] + s[i+1:]
	}
	u, ok := new(big.Int).SetString(s, 10)
	if !ok {
		return nil, false
	}
	return &gb.BigDecimal{Scale: int32(scale - exp), Unscaled: u}, true
}

// decWithScale is r (exact or rounded half up) at the given scale.
func decWithScale(r *big.Rat, scale int32) *gb.BigDecimal {
	n := new(big.Rat).Mul(r, new(big.Rat).SetInt(pow10(int(scale))))
	return &gb.BigDecimal{Scale: scale, Unscaled: roundHalfUp(n)}
}

func roundHalfUp(r *big.Rat) *big.Int {
	q, m := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
	// |m|*2 >= den: round away from zero
	m2 := new(big.Int).Mul(new(big.Int).Abs(m), big.NewInt(2))
	if m2.Cmp(r.Denom()) >= 0 {
		if r.Sign() < 0 {
			q.Sub(q, big.NewInt(1))
		} else {
			q.Add(q, big.NewInt(1))
		}
	}
	return q
}

// intResult gives an integral result in class c, or in the next class that
// holds it when it overflows c.
func intResult(c numClass, r int64) any {
	switch c {
	case ncByte:
		if r >= 0 && r <= math.MaxInt8 {
			return uint8(r)
		}
		fallthrough
	case ncShort:
		if r >= math.MinInt16 && r <= math.MaxInt16 {
			return int16(r)
		}
		fallthrough
	case ncInt:
		if r >= math.MinInt32 && r <= math.MaxInt32 {
			return int32(r)
		}
	}
	return r
}

// numOp applies + - * / to two numbers (NumberHelper.add/sub/mul/div;
// forceFP is div(a, b, true)). An integral division by zero is an error.
func numOp(op string, a, b any, forceFP bool) (any, error) {
	c := commonClass(forceFP, a, b)
	switch c {
	case ncByte, ncShort, ncInt, ncLong:
		x, _ := toInt64(a)
		y, _ := toInt64(b)
		var r int64
		switch op {
		case "+":
			r = x + y
			if c == ncLong {
				return r, nil
			}
		case "-":
			r = x - y
			if c == ncLong {
				return r, nil
			}
		case "*":
			r = x * y
			if c == ncLong {
				return r, nil
			}
			if x != 0 && r/x != y {
				return r, nil
			}
		case "/":
			if y == 0 {
				return nil, evalErr("division by zero (%v / %v)", gremlinString(a), gremlinString(b))
			}
			r = x / y
			if c == ncLong {
				return r, nil
			}
		}
		return intResult(c, r), nil
	case ncBigInt:
		x, y := bigIntOf(a), bigIntOf(b)
		switch op {
		case "+":
			return new(big.Int).Add(x, y), nil
		case "-":
			return new(big.Int).Sub(x, y), nil
		case "*":
			return new(big.Int).Mul(x, y), nil
		}
		if y.Sign() == 0 {
			return nil, evalErr("division by zero (%v / %v)", gremlinString(a), gremlinString(b))
		}
		return new(big.Int).Quo(x, y), nil
	case ncFloat:
		x, _ := toFloat(a)
		y, _ := toFloat(b)
		fx, fy := float32(x), float32(y)
		switch op {
		case "+":
			return fx + fy, nil
		case "-":
			return fx - fy, nil
		case "*":
			return fx * fy, nil
		}
		return fx / fy, nil
	case ncDouble:
		x, _ := toFloat(a)
		y, _ := toFloat(b)
		switch op {
		case "+":
			return x + y, nil
		case "-":
			return x - y, nil
		case "*":
			return x * y, nil
		}
		return x / y, nil
	}
	return decOp(op, a, b)
}

// decOp is BigDecimal arithmetic as Java's BigDecimal does it: + and - at
// the larger scale, * at the sum of the scales, / exact when the quotient
// terminates, else rounded half up to the operands' larger precision plus
// 10 digits, at a scale of at most max(scales, 10).
func decOp(op string, a, b any) (any, error) {
	x, y := bigRatOf(a), bigRatOf(b)
	sa, sb := decScale(a), decScale(b)
	switch op {
	case "+":
		return decWithScale(new(big.Rat).Add(x, y), max(sa, sb)), nil
	case "-":
		return decWithScale(new(big.Rat).Sub(x, y), max(sa, sb)), nil
	case "*":
		return decWithScale(new(big.Rat).Mul(x, y), sa+sb), nil
	}
	if y.Sign() == 0 {
		return nil, evalErr("division by zero (%v / %v)", gremlinString(a), gremlinString(b))
	}
	q := new(big.Rat).Quo(x, y)
	if d, ok := ratDecimal(q); ok {
		if pref := sa - sb; d.Scale < pref {
			return decWithScale(q, pref), nil
		}
		return d, nil
	}
	prec := max(decPrecision(a), decPrecision(b)) + 10
	// the scale that leaves prec significant digits
	f, _ := q.Float64()
	mag := int32(0)
	if f != 0 {
		mag = int32(math.Floor(math.Log10(math.Abs(f)))) + 1
	}
	scale := int32(prec) - mag
	if limit := max(max(sa, sb), 10); scale > limit {
		scale = limit
	}
	return decWithScale(q, scale), nil
}

// decPrecision is the number of digits of a number's unscaled value.
func decPrecision(v any) int {
	var u *big.Int
	switch x := v.(type) {
	case *gb.BigDecimal:
		u = x.Unscaled
	default:
		d, ok := ratDecimal(bigRatOf(v))
		if !ok {
			return 17
		}
		u = d.Unscaled
	}
	if u == nil || u.Sign() == 0 {
		return 1
	}
	return len(new(big.Int).Abs(u).String())
}

func isNaNValue(v any) bool {
	switch x := v.(type) {
	case float64:
		return math.IsNaN(x)
	case float32:
		return math.IsNaN(float64(x))
	}
	return false
}

// toClass converts a number to class c (NumberHelper's xxxValue()).
func toClass(v any, c numClass) any {
	switch c {
	case ncByte, ncShort, ncInt, ncLong:
		n, ok := toInt64(v)
		if !ok {
			f, _ := toFloat(v)
			n = int64(f)
		}
		if c == ncLong {
			return n
		}
		return intResult(c, n)
	case ncBigInt:
		return bigIntOf(v)
	case ncFloat:
		f, _ := toFloat(v)
		return float32(f)
	case ncDouble:
		f, _ := toFloat(v)
		return f
	}
	if d, ok := v.(*gb.BigDecimal); ok {
		return d
	}
	return decWithScale(bigRatOf(v), decScale(v))
}

// numMinMax is NumberHelper.min/max for two values: null and NaN give way to
// the other value; two numbers compare (and the result is) in their common
// class; other values compare by Gremlin's comparability.
func numMinMax(op string, a, b any) (any, error) {
	if a == nil || b == nil {
		if a == nil {
			return b, nil
		}
		return a, nil
	}
	if isNaNValue(a) || isNaNValue(b) {
		if isNaNValue(a) {
			return b, nil
		}
		return a, nil
	}
	if isNumber(a) && isNumber(b) {
		c := commonClass(false, a, b)
		x, y := toClass(a, c), toClass(b, c)
		d := cmpNum(x, y)
		if c == ncBigInt || c == ncBigDec {
			d = bigRatOf(x).Cmp(bigRatOf(y))
		}
		if (op == "min" && d <= 0) || (op == "max" && d >= 0) {
			return x, nil
		}
		return y, nil
	}
	d, ok := compare(a, b)
	if !ok {
		return nil, evalErr("%s() cannot compare %s and %s", op, describe(a), describe(b))
	}
	if (op == "min" && d < 0) || (op == "max" && d > 0) {
		return a, nil
	}
	return b, nil
}
