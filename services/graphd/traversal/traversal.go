// Package traversal interprets Gremlin bytecode (as sent by gremlin-go) over
// graphd's in-memory graph.
//
// Execution is eager and step-at-a-time: each step maps the list of traversers
// produced by the previous step to a new list. Child traversals (arguments such
// as __.out()) run the same way, seeded with one traverser. Semantics follow
// the TinkerPop 3.7 reference documentation; unsupported steps and strategies
// are rejected at compile time with an error naming them.
package traversal

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/worldgate/worldgate/services/graphd/graph"
	gb "github.com/worldgate/worldgate/services/graphd/graphbinary"
)

// Error carries a Gremlin Server status code.
type Error struct {
	Code int
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

func evalErr(format string, a ...any) error {
	return &Error{Code: gb.StatusEvaluation, Msg: fmt.Sprintf(format, a...)}
}

// ErrReadOnly is returned when a read-only execution attempts a mutation.
var ErrReadOnly = &Error{Code: gb.StatusEvaluation, Msg: "The provided traversal has a mutating step and thus is not read only"}

// mutatingSteps are the steps that change the graph.
var mutatingSteps = map[string]bool{
	"addV": true, "addE": true, "property": true, "drop": true, "mergeV": true, "mergeE": true,
	"io": true,
}

// Mutating reports whether bytecode (including nested traversals) contains a
// mutating step.
func Mutating(bc *gb.Bytecode) bool {
	var walk func(v any, depth int) bool
	walk = func(v any, depth int) bool {
		if depth > 100 {
			return true
		}
		switch x := v.(type) {
		case *gb.Bytecode:
			for _, in := range x.Steps {
				if mutatingSteps[in.Op] {
					return true
				}
				for _, a := range in.Args {
					if walk(a, depth+1) {
						return true
					}
				}
			}
		case []any:
			for _, a := range x {
				if walk(a, depth+1) {
					return true
				}
			}
		case *gb.Map:
			for _, e := range x.Entries {
				if walk(e.Key, depth+1) || walk(e.Value, depth+1) {
					return true
				}
			}
		}
		return false
	}
	return walk(bc, 0)
}

// Traversal is compiled bytecode.
type Traversal struct {
	steps []*step
	// *root is set on the traversal Compile returns and nil on its child
	// traversals (they are many and never read it).
	*root
}

// root is what only a whole (root) traversal has: its strategies, side effects
// and what Compile found out about its steps.
type root struct {
	// ReadOnlyStrategy is set when the traversal carries ReadOnlyStrategy.
	ReadOnlyStrategy bool
	sideEffects      []gb.MapEntry
	// productiveBy: ProductiveByStrategy, by() modulators that produce
	// nothing yield null instead of filtering the traverser.
	productiveBy bool
	// bulking: no step anywhere reads whole paths, so equal traversers may be
	// merged into one with a bulk (when step labels are read, only traversers
	// whose labelled objects are the same merge).
	bulking    bool
	labelsOnly bool
	declared   map[string]bool
	// sideEffectOps: withSideEffect(key, value, operator) operators.
	sideEffectOps map[string]string
	// declaredMaps: keys of group(key)/groupCount(key) side effects.
	declaredMaps map[string]bool
	sub          *subgraph
	part         *partition
	// sackInit is withSack's initial value (hasSackInit: withSack was
	// given), sackMerge its merge Operator ("" for none).
	sackInit    any
	hasSackInit bool
	sackMerge   string
	// oneBulk is withBulk(false): traversers merged by a barrier count once.
	oneBulk bool
	// seed is SeedStrategy's (hasSeed: the strategy was given).
	seed    int64
	hasSeed bool
}

type stepFn func(ec *execCtx, s *step, in []*trav) ([]*trav, error)

type step struct {
	op     string
	args   []any
	labels []string
	by     []any
	// childStart: first step of a child (anonymous) traversal.
	childStart bool
	// rootStart: first step of the root traversal (g.mergeV() and friends).
	rootStart bool
	run       stepFn
	// mod: the modulators only a few steps take, nil when none were given; read
	// them with mods(), set them with setMods().
	mod *modulators
}

// modulators are the parts of a step that only a few steps have. They are kept
// out of step, behind one pointer, because every request compiles dozens of
// steps and most have none of them.
type modulators struct {
	// props: property() modulators of addV()/addE().
	props          [][]any
	options        [][]any
	from, to       any
	hasFrom, hasTo bool
	with           map[string]any
	until, emit    *Traversal // of repeat()
	hasEmit        bool
	untilPre       bool // until() came before repeat()
	emitPre        bool // emit() came before repeat()
	times          int
	hasTimes       bool
	timesPre       bool   // times() came before repeat()
	hints          []hint // V()'s index lookups (addHints)
	match          *matchSpec
	loopName       string // repeat(name, ...)
}

// mods returns s's modulators, the zero value when it has none.
func (s *step) mods() modulators {
	if s.mod == nil {
		return modulators{}
	}
	return *s.mod
}

// setMods returns s's modulators to be filled in (at compile time), allocating
// them on first use.
func (s *step) setMods() *modulators {
	if s.mod == nil {
		s.mod = &modulators{}
	}
	return s.mod
}

type hint struct {
	ids    []any
	labels []string
	key    string
	values []any
}

type cardValue struct {
	card  graph.Cardinality
	value any
}

type pnode struct {
	parent *pnode
	obj    any
	labels []string
}

type trav struct {
	obj       any
	path      *pnode
	loops     int
	loopStack []int
	// loopNames are the names of the repeat() loops the traverser is in
	// (outermost first, "" for an unnamed one), one per loopStack entry.
	loopNames []string
	// sack is the traverser's sack (withSack, sack()); hasSack says it was
	// given one (a traverser a step creates anew gets the initial sack).
	sack    any
	hasSack bool
	// bulk is how many identical traversers this one stands for (0 means 1).
	// Traversers are merged only in traversals that never look at paths or
	// labels (Traversal.bulking), and expanded before any step that is not
	// bulk-aware, so a bulk never changes an answer.
	bulk int64
}

// n is the number of traversers t stands for.
func (t *trav) n() int64 {
	if t.bulk <= 0 {
		return 1
	}
	return t.bulk
}

func (t *trav) split(obj any) *trav {
	return &trav{obj: obj, path: &pnode{parent: t.path, obj: obj}, loops: t.loops, loopStack: t.loopStack, loopNames: t.loopNames, bulk: t.bulk, sack: t.sack, hasSack: t.hasSack}
}

func fresh(obj any) *trav { return &trav{obj: obj, path: &pnode{obj: obj}} }

// Compile turns bytecode into an executable traversal.
func Compile(bc *gb.Bytecode) (*Traversal, error) {
	t, err := compile(bc, 0)
	if err != nil {
		return nil, err
	}
	t.root = &root{}
	t.bulking = !readsPaths(t, pathSteps)
	t.labelsOnly = t.bulking && readsPaths(t, labelSteps)
	t.declared, t.declaredMaps = map[string]bool{}, map[string]bool{}
	declareSideEffects(t, t.declared, t.declaredMaps, 0)
	if k := sharedGroupKey(t, map[string]int{}, 0); k != "" {
		return nil, evalErr("group('%s') written by more than one group()/groupCount() step is not supported by graphd", k)
	}
	for _, src := range bc.Sources {
		switch src.Op {
		case "withStrategies":
			for _, a := range src.Args {
				st, ok := a.(*gb.Strategy)
				if !ok {
					return nil, evalErr("withStrategies: unexpected argument %T", a)
				}
				name := st.Class[strings.LastIndex(st.Class, ".")+1:]
				switch name {
				case "ReadOnlyStrategy":
					t.ReadOnlyStrategy = true
				case "OptionsStrategy", "LambdaRestrictionStrategy", "ReservedKeysVerificationStrategy",
					"EdgeLabelVerificationStrategy", "EarlyLimitStrategy", "CountStrategy",
					"IncidentToAdjacentStrategy", "AdjacentToIncidentStrategy", "FilterRankingStrategy",
					"IdentityRemovalStrategy", "InlineFilterStrategy", "LazyBarrierStrategy",
					"MatchPredicateStrategy", "OrderLimitStrategy", "PathProcessorStrategy",
					"PathRetractionStrategy", "RepeatUnrollStrategy", "ByModulatorOptimizationStrategy",
					"ConnectiveStrategy":
				case "ProductiveByStrategy":
					t.productiveBy = true
				case "SeedStrategy":
					var seed any
					if st.Config != nil {
						seed, _ = st.Config.Get("seed")
					}
					n, ok := toInt64(seed)
					if !ok {
						return nil, evalErr("SeedStrategy needs a seed (a long), got %s", describe(seed))
					}
					t.seed, t.hasSeed = n, true
					if err := checkSeeded(t, 0); err != nil {
						return nil, err
					}
				case "SubgraphStrategy":
					sg, err := newSubgraph(st.Config)
					if err != nil {
						return nil, err
					}
					t.sub = sg
				case "PartitionStrategy":
					p, err := newPartition(st.Config)
					if err != nil {
						return nil, err
					}
					t.part = p
				default:
					return nil, evalErr("strategy %s is not supported by graphd", name)
				}
			}
		case "withSack":
			if err := t.withSack(src.Args); err != nil {
				return nil, err
			}
		case "withBulk":
			if len(src.Args) == 1 {
				if b, ok := src.Args[0].(bool); ok && !b {
					t.oneBulk = true
				}
			}
		case "withoutStrategies", "with", "withPath":
		case "withSideEffect":
			if len(src.Args) < 2 {
				return nil, evalErr("withSideEffect requires a key and a value")
			}
			k, _ := src.Args[0].(string)
			if len(src.Args) > 2 {
				// The operator reduces what aggregate()/store() add; any
				// other step writing the key is refused below.
				op, _ := src.Args[2].(gb.Enum)
				if op.Type != gb.TypeOperator || !sideEffectOps[op.Name] {
					return nil, evalErr("withSideEffect(key, value, operator) is not supported by graphd with operator %v", describe(src.Args[2]))
				}
				if t.sideEffectOps == nil {
					t.sideEffectOps = map[string]string{}
				}
				t.sideEffectOps[k] = op.Name
				if t.declaredMaps[k] {
					return nil, evalErr("withSideEffect('%s', value, %s) with group()/groupCount() writing the key is not supported by graphd", k, op.Name)
				}
			}
			t.sideEffects = append(t.sideEffects, gb.MapEntry{Key: k, Value: src.Args[1]})
		default:
			return nil, evalErr("source step %s is not supported by graphd", src.Op)
		}
	}
	return t, nil
}

func compileArg(a any, depth int) (any, error) {
	switch x := a.(type) {
	case *gb.Bytecode:
		if len(x.Steps) == 0 && len(x.Sources) == 1 && x.Sources[0].Op == "CardinalityValueTraversal" && len(x.Sources[0].Args) == 2 {
			c, err := cardinalityOf(x.Sources[0].Args[0])
			if err != nil {
				return nil, err
			}
			return cardValue{card: c, value: x.Sources[0].Args[1]}, nil
		}
		return compile(x, depth+1)
	case *gb.Lambda:
		return nil, evalErr("lambdas are not supported by graphd")
	case *gb.Binding:
		return x.Value, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			c, err := compileArg(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case *gb.Map:
		m := &gb.Map{Entries: make([]gb.MapEntry, len(x.Entries))}
		for i, e := range x.Entries {
			v, err := compileArg(e.Value, depth+1)
			if err != nil {
				return nil, err
			}
			m.Entries[i] = gb.MapEntry{Key: e.Key, Value: v}
		}
		return m, nil
	}
	return a, nil
}

func cardinalityOf(a any) (graph.Cardinality, error) {
	e, ok := a.(gb.Enum)
	if ok {
		switch e.Name {
		case "single":
			return graph.Single, nil
		case "list":
			return graph.List, nil
		case "set":
			return graph.Set, nil
		}
	}
	return 0, evalErr("unsupported cardinality %v", a)
}

func compile(bc *gb.Bytecode, depth int) (*Traversal, error) {
	if depth > 50 {
		return nil, evalErr("traversal nested too deeply")
	}
	t := &Traversal{}
	var pendingUntil, pendingEmit *Traversal
	var pendingEmitSet bool
	var pendingTimes int
	var pendingTimesSet bool
	var prev *step
	for _, in := range bc.Steps {
		args := make([]any, len(in.Args))
		for i, a := range in.Args {
			c, err := compileArg(a, depth)
			if err != nil {
				return nil, err
			}
			args[i] = c
		}
		op := in.Op
		if d, ok := vertexStepDirection(op, args); ok {
			// to(Direction, labels...), toE(...), toV(Direction): the
			// vertex steps out/in/both, outE..., outV...
			op, args = d, args[1:]
		}
		switch op {
		case "as":
			if prev == nil {
				prev = &step{op: "identity", run: runIdentity}
				t.steps = append(t.steps, prev)
			}
			for _, a := range args {
				s, ok := a.(string)
				if !ok {
					return nil, evalErr("as() takes step labels (strings)")
				}
				prev.labels = append(prev.labels, s)
			}
			continue
		case "by":
			if prev == nil {
				return nil, evalErr("by() must follow a step")
			}
			switch len(args) {
			case 0:
				prev.by = append(prev.by, nil)
			case 1:
				prev.by = append(prev.by, args[0])
			default:
				prev.by = append(prev.by, byPair{args[0], args[1]})
			}
			continue
		case "option":
			if prev == nil {
				return nil, evalErr("option() must follow a step")
			}
			m := prev.setMods()
			m.options = append(m.options, args)
			continue
		case "from", "to":
			if prev == nil || len(args) != 1 {
				return nil, evalErr("%s() must follow addE()/mergeE() with one argument", op)
			}
			m := prev.setMods()
			if op == "from" {
				m.from, m.hasFrom = args[0], true
			} else {
				m.to, m.hasTo = args[0], true
			}
			continue
		case "with":
			if prev == nil || len(args) == 0 {
				return nil, evalErr("with() must follow a step")
			}
			m := prev.setMods()
			if m.with == nil {
				m.with = map[string]any{}
			}
			k := fmt.Sprint(args[0])
			if len(args) > 1 {
				m.with[k] = args[1]
			} else {
				m.with[k] = true
			}
			continue
		case "times":
			if len(args) != 1 {
				return nil, evalErr("times() takes a number")
			}
			n, ok := toInt64(args[0])
			if !ok {
				return nil, evalErr("times() takes an integer")
			}
			if prev != nil && prev.op == "repeat" {
				m := prev.setMods()
				m.times, m.hasTimes = int(n), true
			} else {
				pendingTimes, pendingTimesSet = int(n), true
			}
			continue
		case "until", "emit":
			var child *Traversal
			if len(args) > 0 {
				switch x := args[0].(type) {
				case *Traversal:
					child = x
				case *gb.P:
					child = &Traversal{steps: []*step{{op: "is", args: []any{x}, run: runIs}}}
				default:
					return nil, evalErr("%s() takes a traversal or predicate", op)
				}
			}
			if prev != nil && prev.op == "repeat" {
				m := prev.setMods()
				if op == "until" {
					m.until = child
				} else {
					m.emit, m.hasEmit = child, true
				}
			} else if op == "until" {
				pendingUntil = child
			} else {
				pendingEmit, pendingEmitSet = child, true
			}
			continue
		case "read", "write":
			if err := setIOAction(prev, op, args); err != nil {
				return nil, err
			}
			continue
		case "property":
			if prev != nil && (prev.op == "addV" || prev.op == "addE") && len(prev.labels) == 0 {
				m := prev.setMods()
				m.props = append(m.props, args)
				continue
			}
		}
		s := &step{op: op, args: args}
		fn, ok := builders[op]
		if !ok {
			return nil, evalErr("step %s() is not supported by graphd", op)
		}
		s.run = fn
		if op == "repeat" {
			if len(args) == 2 {
				// repeat(loopName, traversal): a named loop for loops(name)
				name, ok := args[0].(string)
				if !ok {
					return nil, evalErr("repeat(name, traversal) takes a loop name (a string)")
				}
				s.setMods().loopName = name
				args = args[1:]
				s.args = args
			}
			if len(args) != 1 {
				return nil, evalErr("repeat() takes one traversal")
			}
			if pendingUntil != nil {
				m := s.setMods()
				m.until, m.untilPre = pendingUntil, true
				pendingUntil = nil
			}
			if pendingEmitSet {
				m := s.setMods()
				m.emit, m.hasEmit, m.emitPre = pendingEmit, true, true
				pendingEmit, pendingEmitSet = nil, false
			}
			if pendingTimesSet {
				m := s.setMods()
				m.times, m.hasTimes, m.timesPre = pendingTimes, true, true
				pendingTimesSet = false
			}
		}
		if err := validate(s); err != nil {
			return nil, err
		}
		s.childStart = depth > 0 && len(t.steps) == 0
		s.rootStart = depth == 0 && len(t.steps) == 0
		t.steps = append(t.steps, s)
		prev = s
	}
	if pendingUntil != nil || pendingEmitSet || pendingTimesSet {
		return nil, evalErr("The repeat()-traversal was not defined: until()/emit()/times() must be used with repeat()")
	}
	for _, s := range t.steps {
		if err := validateModulators(s); err != nil {
			return nil, err
		}
	}
	t.steps = infixConnectives(t.steps, depth == 0)
	addHints(t)
	return t, nil
}

// vertexStepDirection maps to(Direction, ...)/toE/toV to the vertex step
// they stand for.
func vertexStepDirection(op string, args []any) (string, bool) {
	if op != "to" && op != "toE" && op != "toV" || len(args) == 0 {
		return "", false
	}
	d, ok := args[0].(gb.Enum)
	if !ok || d.Type != gb.TypeDirection {
		return "", false
	}
	base := map[string]string{"OUT": "out", "IN": "in", "BOTH": "both"}[d.Name]
	if base == "" {
		return "", false
	}
	switch op {
	case "toE":
		base += "E"
	case "toV":
		base += "V"
	}
	return base, true
}

type byPair struct{ key, order any }

func validate(s *step) error {
	switch s.op {
	case "coalesce", "union", "and", "or":
		for _, a := range s.args {
			if _, ok := a.(*Traversal); !ok {
				return evalErr("%s() takes traversals", s.op)
			}
		}
	case "local", "optional", "not", "sideEffect", "repeat", "flatMap", "map", "filter":
		if len(s.args) != 1 {
			return evalErr("%s() takes one traversal", s.op)
		}
		if _, ok := s.args[0].(*Traversal); !ok {
			if s.op == "sideEffect" {
				return evalErr("sideEffect() with a lambda is not supported by graphd")
			}
			return evalErr("%s() takes a traversal", s.op)
		}
	case "math":
		src, ok := singleString(s.args)
		if !ok {
			return evalErr("math() takes one expression (a string)")
		}
		e, err := compileMath(src)
		if err != nil {
			return err
		}
		s.args = []any{e}
	case "match":
		return compileMatch(s)
	case "call":
		return validateCall(s)
	case "where":
		for _, a := range s.args {
			if c, ok := a.(*Traversal); ok && !whereLabelsOK(c) {
				return evalErr("where() with as() step labels in the middle of its traversal is not supported by graphd")
			}
		}
	}
	return nil
}

// validateModulators checks the modulators (from/to/by) attached after a step.
func validateModulators(s *step) error {
	m := s.mods()
	switch s.op {
	case "addE", "mergeE", "path", "simplePath", "cyclicPath":
	default:
		if m.hasFrom || m.hasTo {
			return evalErr("%s().from()/to() is not supported by graphd", s.op)
		}
	}
	for _, l := range []any{m.from, m.to} {
		if _, ok := l.(string); !ok && l != nil && s.op != "addE" && s.op != "mergeE" {
			return evalErr("%s().from()/to() take step labels", s.op)
		}
	}
	return nil
}

// whereLabelsOK: a where() traversal may label its first step (start label)
// and its last step (end label), also inside and()/or()/not(); labels
// anywhere else are not supported.
func whereLabelsOK(c *Traversal) bool {
	if len(c.steps) == 1 {
		st := c.steps[0]
		if len(st.labels) == 0 && (st.op == "and" || st.op == "or" || st.op == "not") {
			for _, a := range st.args {
				if k, ok := a.(*Traversal); ok && !whereLabelsOK(k) {
					return false
				}
			}
			return true
		}
	}
	for i, st := range c.steps {
		if len(st.labels) > 1 || (len(st.labels) == 1 && i != 0 && i != len(c.steps)-1) {
			return false
		}
		if i == 0 && len(st.labels) == 1 && st.op != "identity" && len(c.steps) > 1 {
			return false
		}
		if st.op == "where" {
			// a nested where() scopes its own labels (checked when it
			// was compiled)
			continue
		}
		for _, a := range st.args {
			if k, ok := a.(*Traversal); ok && hasLabels(k) {
				return false
			}
		}
	}
	return true
}

// hasLabels reports whether t or a child traversal labels a step with as().
func hasLabels(t *Traversal) bool {
	for _, s := range t.steps {
		if len(s.labels) > 0 {
			return true
		}
		for _, a := range s.args {
			if c, ok := a.(*Traversal); ok && hasLabels(c) {
				return true
			}
		}
	}
	return false
}

// addHints lets a leading V() use the label/property/id indexes of the
// has-steps that follow it.
func addHints(t *Traversal) {
	for i, s := range t.steps {
		if s.op != "V" || len(s.args) != 0 {
			continue
		}
		for _, n := range t.steps[i+1:] {
			switch n.op {
			case "hasLabel":
				var ls []string
				for _, a := range n.args {
					if l, ok := a.(string); ok {
						ls = append(ls, l)
					} else {
						ls = nil
						break
					}
				}
				if ls != nil {
					s.addHint(hint{labels: ls})
				}
			case "hasId":
				if len(n.args) == 1 {
					if p, ok := n.args[0].(*gb.P); ok {
						if p.Op == "within" || p.Op == "eq" {
							s.addHint(hint{ids: flattenValues(p.Values)})
						}
						continue
					}
				}
				s.addHint(hint{ids: flattenValues(n.args)})
			case "has":
				args := n.args
				if len(args) == 3 {
					if l, ok := args[0].(string); ok {
						s.addHint(hint{labels: []string{l}})
					}
					args = args[1:]
				}
				if len(args) != 2 {
					continue
				}
				var vals []any
				switch v := args[1].(type) {
				case *gb.P:
					if !v.Text && (v.Op == "eq" || v.Op == "within") {
						vals = flattenValues(v.Values)
					}
				case *Traversal:
				default:
					vals = []any{v}
				}
				if vals == nil {
					continue
				}
				switch k := args[0].(type) {
				case string:
					s.addHint(hint{key: k, values: vals})
				case gb.Enum:
					switch k.Name {
					case "id":
						s.addHint(hint{ids: vals})
					case "label":
						var ls []string
						for _, v := range vals {
							if l, ok := v.(string); ok {
								ls = append(ls, l)
							}
						}
						if len(ls) == len(vals) {
							s.addHint(hint{labels: ls})
						}
					}
				}
			default:
				goto done
			}
		}
	done:
	}
}

func (s *step) addHint(h hint) {
	m := s.setMods()
	m.hints = append(m.hints, h)
}

// Limits bound one execution.
type Limits struct {
	MaxResults int
	// Files is the directory io(path).read() reads from (an *os.Root);
	// nil: io() is refused. MaxFileBytes bounds one file (0: no bound).
	Files        Files
	MaxFileBytes int64
}

type execCtx struct {
	ctx         context.Context
	g           *graph.Graph
	tx          *graph.Tx
	sideEffects map[string]any
	maxResults  int
	ticks       int
	// productiveBy is ProductiveByStrategy (see Traversal.productiveBy).
	productiveBy bool
	bulking      bool
	labelsOnly   bool
	// dedupSeen keeps dedup() state of repeat bodies across iterations.
	dedupSeen map[*step]map[any]bool
	// declared: side-effect keys that aggregate()/store() steps of the
	// traversal fill (they exist, empty, before the first value).
	declared map[string]bool
	// sub is SubgraphStrategy (nil without it).
	sub *subgraph
	// part is PartitionStrategy (nil without it).
	part *partition
	// groupMembers: the traversers each group(key) step has seen.
	groupMembers map[*step][]*trav
	// sideEffectOps: operators of withSideEffect(key, value, operator).
	sideEffectOps map[string]string
	// declaredMaps: side-effect keys of group(key)/groupCount(key) steps.
	declaredMaps map[string]bool
	// typeErrs counts comparisons that were errors (see comparisonError).
	typeErrs int
	// sacks: withSack's initial value and merge operator, withBulk(false).
	sackInit    any
	hasSackInit bool
	sackMerge   string
	oneBulk     bool
	// readsPaths: the traversal reads paths or step labels (a barrier
	// cannot merge its traversers then).
	readsPaths bool
	// seed, hasSeed: SeedStrategy; randoms: each coin()/sample() step's
	// java.util.Random.
	seed    int64
	hasSeed bool
	randoms map[*step]*javaRandom
	// files, maxFileBytes: Limits.Files and Limits.MaxFileBytes.
	files        Files
	maxFileBytes int64
}

// ErrTooManyResults is returned when a traversal exceeds MaxResults.
var ErrTooManyResults = &Error{Code: gb.StatusEvaluation, Msg: "traversal exceeded the configured result limit"}

func (ec *execCtx) tick() error {
	ec.ticks++
	if ec.ticks&1023 == 0 {
		if err := ec.ctx.Err(); err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				return &Error{Code: gb.StatusTimeout, Msg: "traversal exceeded the evaluation timeout"}
			}
			return &Error{Code: gb.StatusServerError, Msg: "traversal cancelled: " + err.Error()}
		}
	}
	return nil
}

func (ec *execCtx) checkSize(n int) error {
	if ec.maxResults > 0 && n > ec.maxResults {
		return ErrTooManyResults
	}
	return nil
}

// Execute runs the traversal. tx nil means read-only: any mutation fails.
// The returned values are ready for GraphBinary (converted with ToWire), one
// per traverser (bulks expanded).
func (t *Traversal) Execute(ctx context.Context, g *graph.Graph, tx *graph.Tx, lim Limits, includeProperties bool) ([]any, error) {
	vals, bulks, err := t.ExecuteBulk(ctx, g, tx, lim, includeProperties)
	if err != nil {
		return nil, err
	}
	var out []any
	for i, v := range vals {
		for j := int64(0); j < bulks[i]; j++ {
			if lim.MaxResults > 0 && len(out) >= lim.MaxResults {
				return nil, ErrTooManyResults
			}
			out = append(out, v)
		}
	}
	return out, nil
}

// ExecuteBulk is Execute with the traversers' bulks: vals[i] stands for
// bulks[i] results (GraphBinary Traverser bulk; clients expand it).
func (t *Traversal) ExecuteBulk(ctx context.Context, g *graph.Graph, tx *graph.Tx, lim Limits, includeProperties bool) (vals []any, bulks []int64, err error) {
	ec := &execCtx{ctx: ctx, g: g, tx: tx, sideEffects: map[string]any{}, maxResults: lim.MaxResults, productiveBy: t.productiveBy, bulking: t.bulking, labelsOnly: t.labelsOnly, declared: t.declared, declaredMaps: t.declaredMaps, sideEffectOps: t.sideEffectOps, sub: t.sub, part: t.part,
		sackInit: t.sackInit, hasSackInit: t.hasSackInit, sackMerge: t.sackMerge, oneBulk: t.oneBulk,
		seed: t.seed, hasSeed: t.hasSeed, files: lim.Files, maxFileBytes: lim.MaxFileBytes,
		readsPaths: readsPaths(t, pathStepsOnly) || readsPaths(t, labelSteps)}
	for _, se := range t.sideEffects {
		if k, ok := se.Key.(string); ok {
			ec.sideEffects[k] = se.Value
		}
	}
	if len(t.steps) == 0 {
		return nil, nil, nil
	}
	if !startSteps[t.steps[0].op] {
		return nil, nil, evalErr("a traversal must start with V(), E(), addV(), addE(), mergeV(), mergeE(), inject(), union(), call() or io(), not %s()", t.steps[0].op)
	}
	out, err := ec.run(t, []*trav{{}})
	if err != nil {
		return nil, nil, err
	}
	if err := ctx.Err(); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, nil, &Error{Code: gb.StatusTimeout, Msg: "traversal exceeded the evaluation timeout"}
		}
		return nil, nil, err
	}
	vals = make([]any, len(out))
	bulks = make([]int64, len(out))
	o := wireOpts{tokensOnly: !includeProperties}
	for i, tr := range out {
		vals[i] = toWire(tr.obj, o)
		bulks[i] = tr.n()
	}
	return vals, bulks, nil
}

var startSteps = map[string]bool{"V": true, "E": true, "addV": true, "addE": true, "mergeV": true, "mergeE": true, "inject": true, "union": true, "call": true, "io": true}

func (ec *execCtx) run(t *Traversal, in []*trav) ([]*trav, error) {
	cur := in
	for _, s := range t.steps {
		if err := ec.ctx.Err(); err != nil {
			return nil, ec.tick2(err)
		}
		if !bulkAware[s.op] {
			var err error
			if cur, err = ec.expand(cur); err != nil {
				return nil, err
			}
		}
		out, err := s.run(ec, s, cur)
		if err != nil {
			return nil, err
		}
		if len(s.labels) > 0 {
			for i, tr := range out {
				out[i] = withLabels(tr, s.labels)
			}
		}
		if ec.hasSackInit {
			ec.giveSacks(out)
		}
		if err := ec.checkSize(len(out)); err != nil {
			return nil, err
		}
		if ec.bulking && adjacencySteps[s.op] {
			out = ec.merge(out)
		}
		cur = out
	}
	return cur, nil
}

// bulkAware steps handle a traverser with a bulk correctly (they map or
// filter it as one, or count its bulk); before any other step bulked
// traversers are expanded.
var bulkAware = map[string]bool{
	"V": true, "E": true, "out": true, "in": true, "both": true, "outE": true, "inE": true, "bothE": true,
	"outV": true, "inV": true, "otherV": true, "bothV": true,
	"has": true, "hasLabel": true, "hasId": true, "hasKey": true, "hasValue": true, "hasNot": true, "is": true,
	"values": true, "id": true, "label": true, "key": true, "value": true, "constant": true, "properties": true,
	"identity": true, "not": true, "and": true, "or": true, "filter": true, "count": true, "dedup": true,
	"repeat": true, "local": true, "union": true, "optional": true, "coalesce": true, "choose": true,
	"map": true, "flatMap": true, "valueMap": true, "elementMap": true, "groupCount": true, "group": true, "select": true, "where": true, "project": true,
	"cap": true, // it reads only the side effects
}

// adjacencySteps multiply traversers; their output is merged when bulking.
var adjacencySteps = map[string]bool{"out": true, "in": true, "both": true, "outE": true, "inE": true, "bothE": true,
	"outV": true, "inV": true, "otherV": true, "bothV": true}

type mergeKey struct {
	obj    any
	loops  int
	stack  string
	labels string
}

// merge folds traversers on the same element with the same loop state into
// one, adding their bulks (first-occurrence order is kept).
func (ec *execCtx) merge(in []*trav) []*trav {
	if len(in) < 2 {
		return in
	}
	idx := make(map[mergeKey]int, len(in))
	out := in[:0:0]
	for _, t := range in {
		switch t.obj.(type) {
		case *graph.Vertex, *graph.Edge:
		default:
			out = append(out, t)
			continue
		}
		k := mergeKey{obj: t.obj, loops: t.loops}
		if len(t.loopStack) > 0 {
			k.stack = fmt.Sprint(t.loopStack, t.loopNames)
		}
		if ec.labelsOnly {
			k.labels = labelledKey(t.path)
		}
		if i, ok := idx[k]; ok {
			m := *out[i]
			m.bulk = m.n() + t.n()
			out[i] = &m
			continue
		}
		idx[k] = len(out)
		out = append(out, t)
	}
	return out
}

// expand turns bulked traversers back into single ones.
func (ec *execCtx) expand(in []*trav) ([]*trav, error) {
	total := int64(0)
	bulked := false
	for _, t := range in {
		total += t.n()
		bulked = bulked || t.bulk > 1
	}
	if !bulked {
		return in, nil
	}
	if ec.maxResults > 0 && total > int64(ec.maxResults) {
		return nil, ErrTooManyResults
	}
	out := make([]*trav, 0, total)
	for _, t := range in {
		if t.bulk <= 1 {
			out = append(out, t)
			continue
		}
		one := *t
		one.bulk = 0
		for j := int64(0); j < t.bulk; j++ {
			c := one
			out = append(out, &c)
		}
	}
	return out, nil
}

// labelledKey identifies the labelled objects of a path (for merging
// traversers that only differ in unlabelled history). Pointers only serve
// as identities here, never as an order or an output.
func labelledKey(p *pnode) string {
	var sb strings.Builder
	for n := p; n != nil; n = n.parent {
		if len(n.labels) == 0 {
			continue
		}
		fmt.Fprintf(&sb, "%v=", n.labels)
		switch o := n.obj.(type) {
		case *graph.Vertex, *graph.Edge, *graph.VertexProperty:
			fmt.Fprintf(&sb, "%p;", o)
		default:
			canonStr(&sb, o)
			sb.WriteString(";")
		}
	}
	return sb.String()
}

// pathSteps read whole paths: a traversal containing any of them never merges
// traversers. labelSteps (and as() labels) read only labelled objects.
var (
	pathSteps = map[string]bool{"path": true, "simplePath": true, "cyclicPath": true, "match": true, "tree": true, "sack": true}
	// pathStepsOnly are the steps that read whole paths (sack() is in
	// pathSteps only to keep traversers with their own sacks apart).
	pathStepsOnly = map[string]bool{"path": true, "simplePath": true, "cyclicPath": true, "match": true, "tree": true}
	labelSteps    = map[string]bool{"select": true, "where": true, "addE": true, "mergeE": true, "dedup": true}
)

// readsPaths reports whether t or any child traversal has a step of ops
// (with labelSteps, any as() label counts too).
func readsPaths(t *Traversal, ops map[string]bool) bool {
	for _, s := range t.steps {
		if ops[s.op] || (ops["select"] && len(s.labels) > 0) {
			return true
		}
		if anyReadsPaths(s.args, ops) || anyReadsPaths(s.by, ops) {
			return true
		}
		m := s.mods()
		for _, p := range m.props {
			if anyReadsPaths(p, ops) {
				return true
			}
		}
		for _, o := range m.options {
			if anyReadsPaths(o, ops) {
				return true
			}
		}
		if childReadsPaths(m.from, ops) || childReadsPaths(m.to, ops) {
			return true
		}
		if m.until != nil && readsPaths(m.until, ops) {
			return true
		}
		if m.emit != nil && readsPaths(m.emit, ops) {
			return true
		}
	}
	return false
}

func anyReadsPaths(as []any, ops map[string]bool) bool {
	for _, a := range as {
		if childReadsPaths(a, ops) {
			return true
		}
	}
	return false
}

func childReadsPaths(a any, ops map[string]bool) bool {
	switch x := a.(type) {
	case *Traversal:
		return readsPaths(x, ops)
	case byPair:
		return childReadsPaths(x.key, ops)
	case []any:
		return anyReadsPaths(x, ops)
	}
	return false
}

func (ec *execCtx) tick2(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return &Error{Code: gb.StatusTimeout, Msg: "traversal exceeded the evaluation timeout"}
	}
	return err
}

func withLabels(t *trav, labels []string) *trav {
	n := *t
	if t.path == nil {
		n.path = &pnode{obj: t.obj, labels: labels}
		return &n
	}
	ls := make([]string, 0, len(t.path.labels)+len(labels))
	ls = append(append(ls, t.path.labels...), labels...)
	n.path = &pnode{parent: t.path.parent, obj: t.path.obj, labels: ls}
	return &n
}

// runChild runs child with a single traverser.
func (ec *execCtx) runChild(child *Traversal, t *trav) ([]*trav, error) {
	if t.bulk <= 1 {
		return ec.run(child, []*trav{t})
	}
	// A bulked traverser stands for t.bulk identical ones: run the child once
	// for one of them and give each output the same multiplicity.
	one := *t
	one.bulk = 0
	out, err := ec.run(child, []*trav{&one})
	if err != nil {
		return nil, err
	}
	res := make([]*trav, len(out))
	for i, o := range out {
		c := *o
		c.bulk = o.n() * t.bulk
		res[i] = &c
	}
	return res, nil
}

func (ec *execCtx) first(child *Traversal, t *trav) (any, bool, error) {
	out, err := ec.runChild(child, t)
	if err != nil || len(out) == 0 {
		return nil, false, err
	}
	return out[0].obj, true, nil
}

func (ec *execCtx) mut() (*graph.Tx, error) {
	if ec.tx == nil {
		return nil, ErrReadOnly
	}
	return ec.tx, nil
}

// isInfix: a.and().b, a.or().b (the connective's own labels, as in
// a.and().as('x').b, label the start of its right operand).
func isInfix(s *step, op string) bool { return s.op == op && len(s.args) == 0 }

// infixConnectives rewrites the infix forms a.and().b and a.or().b as
// TinkerPop's ConnectiveStrategy does: and() binds tighter than or(); the
// left operand is everything before the connective (after the start step of
// a root traversal), the right operand everything after it.
func infixConnectives(steps []*step, root bool) []*step {
	hasInfix := false
	for _, s := range steps {
		if isInfix(s, "and") || isInfix(s, "or") {
			hasInfix = true
			break
		}
	}
	if !hasInfix {
		return steps
	}
	var head []*step
	body := steps
	if root && len(steps) > 0 && startSteps[steps[0].op] {
		head, body = steps[:1], steps[1:]
	}
	split := func(ss []*step, op string) [][]*step {
		var parts [][]*step
		cur := []*step{}
		for _, s := range ss {
			if isInfix(s, op) {
				parts = append(parts, cur)
				cur = []*step{}
				if len(s.labels) > 0 {
					cur = append(cur, &step{op: "identity", labels: s.labels, run: runIdentity})
				}
				continue
			}
			cur = append(cur, s)
		}
		return append(parts, cur)
	}
	andOf := func(ss []*step) []*step {
		parts := split(ss, "and")
		if len(parts) == 1 {
			return ss
		}
		args := make([]any, len(parts))
		for i, p := range parts {
			args[i] = &Traversal{steps: p}
		}
		return []*step{{op: "and", args: args, run: runAnd}}
	}
	ors := split(body, "or")
	var out []*step
	if len(ors) == 1 {
		out = andOf(body)
	} else {
		args := make([]any, len(ors))
		for i, p := range ors {
			args[i] = &Traversal{steps: andOf(p)}
		}
		out = []*step{{op: "or", args: args, run: runOr}}
	}
	return append(append([]*step(nil), head...), out...)
}

// declareSideEffects collects the keys of aggregate()/store() steps anywhere
// in t.
func declareSideEffects(t *Traversal, into, maps map[string]bool, depth int) {
	if depth > 100 {
		return
	}
	for _, s := range t.steps {
		if s.op == "aggregate" || s.op == "store" {
			if args, _ := scopeLocal(s.args); len(args) == 1 {
				if k, ok := args[0].(string); ok {
					into[k] = true
				}
			}
		}
		if (s.op == "group" || s.op == "groupCount") && len(s.args) == 1 {
			if k, ok := s.args[0].(string); ok {
				maps[k] = true
			}
		}
		s.anyChild(func(c *Traversal) bool {
			declareSideEffects(c, into, maps, depth+1)
			return false
		})
	}
}

// sharedGroupKey returns a side-effect key that a group(key) step shares
// with another group(key)/groupCount(key) step (their partial groupings would have to be merged by
// TinkerPop's reducing operator, which graphd does not do).
func sharedGroupKey(t *Traversal, seen map[string]int, depth int) string {
	if depth > 100 {
		return ""
	}
	for _, s := range t.steps {
		if (s.op == "group" || s.op == "groupCount") && len(s.args) == 1 {
			if k, ok := s.args[0].(string); ok {
				// counts: group() +1000, groupCount() +1; groupCount() steps
				// sharing a key just add up their counts.
				if s.op == "group" {
					seen[k] += 1000
				} else {
					seen[k]++
				}
				if seen[k] > 1000 {
					return k
				}
			}
		}
		var key string
		if s.anyChild(func(c *Traversal) bool {
			key = sharedGroupKey(c, seen, depth+1)
			return key != ""
		}) {
			return key
		}
	}
	return ""
}

// anyChild calls f on each traversal that s takes directly as an argument, a
// by() modulator, until(), emit() or an option() (in that order), and
// reports whether f returned true for one (it stops there).
func (s *step) anyChild(f func(*Traversal) bool) bool {
	for _, group := range [...][]any{s.args, s.by} {
		for _, a := range group {
			if c, ok := a.(*Traversal); ok && f(c) {
				return true
			}
		}
	}
	m := s.mods()
	for _, c := range [...]*Traversal{m.until, m.emit} {
		if c != nil && f(c) {
			return true
		}
	}
	for _, o := range m.options {
		for _, a := range o {
			if c, ok := a.(*Traversal); ok && f(c) {
				return true
			}
		}
	}
	return false
}
