package traversal

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	gb "github.com/worldgate/worldgate/services/graphd/graphbinary"
)

// math(expression): TinkerPop's MathStep, whose expressions are exp4j's
// (implicit multiplication off). The language:
//
//   - numbers (1, 2.5, .5, 1e3), parentheses;
//   - binary + - (lowest), * / % (higher), ^ (right-associative, highest);
//     unary - and + bind tighter than * but looser than ^ (-2^2 is -4);
//   - the functions abs acos asin atan cbrt ceil cos cosh exp floor log
//     log10 log2 signum sin sinh sqrt tan tanh, called as f(x) (or, as
//     exp4j allows, f x);
//   - every other name is a variable: _ is the current object, any other
//     name a scope value (a key of the current map, a side effect, or the
//     last object labelled so in the path, in that order).
//
// Each variable, in the order of first appearance, takes the next by()
// modulator (round robin; none: the value itself). A by() that produces
// nothing filters the traverser out; a value that is not a number is an
// error. The result is always a Double.

// mathFuncs are the functions math() knows (TinkerPop's list).
var mathFuncs = map[string]func(float64) float64{
	"abs": math.Abs, "acos": math.Acos, "asin": math.Asin, "atan": math.Atan,
	"cbrt": math.Cbrt, "ceil": math.Ceil, "cos": javaCos, "cosh": math.Cosh,
	"exp": math.Exp, "floor": math.Floor,
	"log": math.Log, "log10": math.Log10, "log2": func(x float64) float64 { return math.Log(x) / math.Log(2) },
	"signum": signum, "sin": javaSin, "sinh": math.Sinh, "sqrt": math.Sqrt,
	"tan": javaTan, "tanh": math.Tanh,
}

// exp4jOnly are exp4j's other built-in functions: TinkerPop takes their
// names for variables and exp4j then refuses the expression, so graphd
// refuses them by name too.
var exp4jOnly = map[string]bool{"pow": true, "log1p": true, "expm1": true, "cot": true, "csc": true,
	"sec": true, "csch": true, "sech": true, "coth": true, "toradian": true, "todegree": true}

func signum(x float64) float64 {
	switch {
	case x > 0:
		return 1
	case x < 0:
		return -1
	}
	return x // 0, -0 and NaN are their own signum
}

type mathTokKind int

const (
	mtNum mathTokKind = iota
	mtVar
	mtFunc
	mtOp   // binary operator
	mtUnOp // unary operator
	mtOpen
	mtClose
)

type mathTok struct {
	kind mathTokKind
	num  float64
	name string // variable or function name; operator symbol
}

// mathExpr is a compiled math() expression in reverse Polish notation.
type mathExpr struct {
	src  string
	rpn  []mathTok
	vars []string // in order of first appearance
}

func (m *mathExpr) String() string { return m.src }

func mathPrec(t mathTok) (prec int, leftAssoc bool) {
	if t.kind == mtUnOp {
		return 5000, false
	}
	switch t.name {
	case "+", "-":
		return 500, true
	case "*", "/", "%":
		return 1000, true
	}
	return 10000, false // ^
}

func mathErr(src, format string, a ...any) error {
	return evalErr("math(%q): %s", src, fmt.Sprintf(format, a...))
}

// tokenizeMath splits src into tokens; + and - are unary at the start and
// after an operator or an opening parenthesis.
func tokenizeMath(src string) ([]mathTok, error) {
	var toks []mathTok
	unaryPos := func() bool {
		if len(toks) == 0 {
			return true
		}
		k := toks[len(toks)-1].kind
		return k == mtOp || k == mtUnOp || k == mtOpen
	}
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c >= '0' && c <= '9' || c == '.':
			j := i
			for j < len(src) && (src[j] >= '0' && src[j] <= '9' || src[j] == '.') {
				j++
			}
			if j < len(src) && (src[j] == 'e' || src[j] == 'E') {
				k := j + 1
				if k < len(src) && (src[k] == '+' || src[k] == '-') {
					k++
				}
				if k < len(src) && src[k] >= '0' && src[k] <= '9' {
					for k < len(src) && src[k] >= '0' && src[k] <= '9' {
						k++
					}
					j = k
				}
			}
			f, err := strconv.ParseFloat(src[i:j], 64)
			if err != nil {
				return nil, mathErr(src, "%q is not a number", src[i:j])
			}
			toks = append(toks, mathTok{kind: mtNum, num: f})
			i = j
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			j := i
			for j < len(src) && (src[j] == '_' || src[j] >= 'a' && src[j] <= 'z' || src[j] >= 'A' && src[j] <= 'Z' || src[j] >= '0' && src[j] <= '9') {
				j++
			}
			name := src[i:j]
			switch {
			case mathFuncs[name] != nil:
				toks = append(toks, mathTok{kind: mtFunc, name: name})
			case exp4jOnly[name]:
				return nil, mathErr(src, "the function %s() is not one of math()'s functions (abs, acos, asin, atan, cbrt, ceil, cos, cosh, exp, floor, log, log10, log2, signum, sin, sinh, sqrt, tan, tanh)", name)
			default:
				toks = append(toks, mathTok{kind: mtVar, name: name})
			}
			i = j
		case strings.IndexByte("+-*/%^", c) >= 0:
			if unaryPos() {
				if c != '+' && c != '-' {
					return nil, mathErr(src, "operator %c is missing its left operand", c)
				}
				toks = append(toks, mathTok{kind: mtUnOp, name: string(c)})
			} else {
				toks = append(toks, mathTok{kind: mtOp, name: string(c)})
			}
			i++
		case c == '(' || c == '[' || c == '{':
			toks = append(toks, mathTok{kind: mtOpen})
			i++
		case c == ')' || c == ']' || c == '}':
			toks = append(toks, mathTok{kind: mtClose})
			i++
		default:
			return nil, mathErr(src, "unexpected character %q", rune(c))
		}
	}
	return toks, nil
}

// compileMath parses a math() expression (exp4j's shunting yard: functions
// wait on the operator stack until the parenthesis that closes their
// argument, or the end).
func compileMath(src string) (*mathExpr, error) {
	toks, err := tokenizeMath(src)
	if err != nil {
		return nil, err
	}
	e := &mathExpr{src: src}
	seen := map[string]bool{}
	var stack []mathTok
	for _, t := range toks {
		switch t.kind {
		case mtNum:
			e.rpn = append(e.rpn, t)
		case mtVar:
			e.rpn = append(e.rpn, t)
			if !seen[t.name] {
				seen[t.name] = true
				e.vars = append(e.vars, t.name)
			}
		case mtFunc, mtOpen:
			stack = append(stack, t)
		case mtOp, mtUnOp:
			p1, left1 := mathPrec(t)
			for len(stack) > 0 {
				top := stack[len(stack)-1]
				if top.kind != mtOp && top.kind != mtUnOp {
					break
				}
				if t.kind == mtUnOp && top.kind == mtOp {
					break
				}
				p2, _ := mathPrec(top)
				if (left1 && p1 <= p2) || p1 < p2 {
					e.rpn = append(e.rpn, top)
					stack = stack[:len(stack)-1]
					continue
				}
				break
			}
			stack = append(stack, t)
		case mtClose:
			for len(stack) > 0 && stack[len(stack)-1].kind != mtOpen {
				e.rpn = append(e.rpn, stack[len(stack)-1])
				stack = stack[:len(stack)-1]
			}
			if len(stack) == 0 {
				return nil, mathErr(src, "mismatched parentheses")
			}
			stack = stack[:len(stack)-1]
			if len(stack) > 0 && stack[len(stack)-1].kind == mtFunc {
				e.rpn = append(e.rpn, stack[len(stack)-1])
				stack = stack[:len(stack)-1]
			}
		}
	}
	for len(stack) > 0 {
		t := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if t.kind == mtOpen {
			return nil, mathErr(src, "mismatched parentheses")
		}
		e.rpn = append(e.rpn, t)
	}
	// Validate: every operator and function finds its operands, and one
	// value is left.
	n := 0
	for _, t := range e.rpn {
		switch t.kind {
		case mtNum, mtVar:
			n++
		case mtFunc, mtUnOp:
			if n < 1 {
				return nil, mathErr(src, "%s has no operand", t.name)
			}
		case mtOp:
			if n < 2 {
				return nil, mathErr(src, "operator %s is missing an operand", t.name)
			}
			n--
		}
	}
	if n != 1 {
		if n == 0 {
			return nil, mathErr(src, "the expression is empty")
		}
		return nil, mathErr(src, "too many operands (implicit multiplication is not allowed: write 2*x, not 2x)")
	}
	return e, nil
}

// eval computes the expression with the variables' values.
func (m *mathExpr) eval(vars map[string]float64) (float64, error) {
	stack := make([]float64, 0, len(m.rpn))
	for _, t := range m.rpn {
		switch t.kind {
		case mtNum:
			stack = append(stack, t.num)
		case mtVar:
			stack = append(stack, vars[t.name])
		case mtFunc:
			x := &stack[len(stack)-1]
			*x = mathFuncs[t.name](*x)
		case mtUnOp:
			if t.name == "-" {
				stack[len(stack)-1] = -stack[len(stack)-1]
			}
		case mtOp:
			a, b := stack[len(stack)-2], stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			var r float64
			switch t.name {
			case "+":
				r = a + b
			case "-":
				r = a - b
			case "*":
				r = a * b
			case "/", "%":
				if b == 0 {
					return 0, mathErr(m.src, "division by zero")
				}
				if t.name == "/" {
					r = a / b
				} else {
					r = math.Mod(a, b) // Java's %: the sign of the dividend
				}
			case "^":
				r = math.Pow(a, b)
			}
			stack[len(stack)-1] = r
		}
	}
	return stack[0], nil
}

// scopeValue is TinkerPop's Scoping lookup: a key of the current map, a
// side effect, or the last object the path labels so.
func (ec *execCtx) scopeValue(t *trav, key string) (any, bool) {
	if m, ok := t.obj.(*gb.Map); ok {
		if v, ok := m.Get(key); ok {
			return v, true
		}
	}
	if v, ok := ec.sideEffects[key]; ok {
		return v, true
	}
	var found any
	ok := false
	for _, n := range pathNodes(t) {
		for _, l := range n.labels {
			if l == key {
				found, ok = n.obj, true
				break
			}
		}
	}
	return found, ok
}

func runMath(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	m, ok := s.args[0].(*mathExpr)
	if !ok {
		return nil, evalErr("math() takes an expression (a string)")
	}
	out := make([]*trav, 0, len(in))
	vars := make(map[string]float64, len(m.vars))
next:
	for _, t := range in {
		for i, name := range m.vars {
			var by any
			if len(s.by) > 0 {
				by = s.by[i%len(s.by)]
			}
			arg := t
			if name != "_" {
				v, _ := ec.scopeValue(t, name)
				arg = t.split(v)
			}
			v, ok, err := ec.byValue(by, arg)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue next
			}
			f, isNum := toFloat(v)
			if !isNumber(v) || !isNum {
				return nil, evalErr("The variable %s for math() step must resolve to a Number - it is instead of type %s with value %s",
					name, javaTypeName(v), gremlinString(v))
			}
			vars[name] = f
		}
		r, err := m.eval(vars)
		if err != nil {
			return nil, err
		}
		out = append(out, t.split(r))
	}
	return out, nil
}

// javaTypeName names a value's type as a Java user reads it in TinkerPop's
// messages.
func javaTypeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "java.lang.String"
	case bool:
		return "java.lang.Boolean"
	case []any:
		return "java.util.ArrayList"
	case *gb.Map:
		return "java.util.LinkedHashMap"
	case *gb.Set:
		return "java.util.LinkedHashSet"
	}
	return strings.TrimPrefix(fmt.Sprintf("%T", v), "*")
}

func singleString(args []any) (string, bool) {
	if len(args) != 1 {
		return "", false
	}
	s, ok := args[0].(string)
	return s, ok
}
