package server_test

import (
	"slices"
	"strings"
	"testing"

	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"
)

type G = *gremlingo.GraphTraversalSource
type GT = *gremlingo.GraphTraversal

// TestModernSteps checks per-step semantics on TinkerPop's "modern" graph
// against the results in the TinkerPop reference documentation.
func TestModernSteps(t *testing.T) {
	g := modern(t)

	cases := []struct {
		name    string
		tr      func(g G) GT
		want    []string
		ordered bool
	}{
		{"V.count", func(g G) GT { return g.V().Count() }, []string{"6"}, true},
		{"E.count", func(g G) GT { return g.E().Count() }, []string{"6"}, true},
		{"V(id)", func(g G) GT { return g.V(1) }, []string{"v[1]"}, true},
		{"V(ids)", func(g G) GT { return g.V(1, 2, 99) }, []string{"v[1]", "v[2]"}, false},
		{"out", func(g G) GT { return g.V(1).Out() }, []string{"v[2]", "v[3]", "v[4]"}, false},
		{"out(label)", func(g G) GT { return g.V(1).Out("knows").Values("name") }, []string{"josh", "vadas"}, false},
		{"in", func(g G) GT { return g.V(3).In("created").Values("name") }, []string{"josh", "marko", "peter"}, false},
		{"in.none", func(g G) GT { return g.V(1).In() }, []string{}, false},
		{"both", func(g G) GT { return g.V(4).Both() }, []string{"v[1]", "v[3]", "v[5]"}, false},
		{"outE", func(g G) GT { return g.V(1).OutE() }, []string{"e[7]", "e[8]", "e[9]"}, false},
		{"inE.outV", func(g G) GT { return g.V(2).InE().OutV() }, []string{"v[1]"}, false},
		{"bothE.count", func(g G) GT { return g.V(4).BothE().Count() }, []string{"3"}, true},
		{"outE.inV", func(g G) GT { return g.V(1).OutE("knows").InV().Values("name") }, []string{"josh", "vadas"}, false},
		{"otherV", func(g G) GT { return g.V(1).OutE().OtherV() }, []string{"v[2]", "v[3]", "v[4]"}, false},
		{"otherV.in", func(g G) GT { return g.V(3).InE().OtherV().Values("name") }, []string{"josh", "marko", "peter"}, false},
		{"bothV", func(g G) GT { return g.E(7).BothV() }, []string{"v[1]", "v[2]"}, false},
		{"has(k,v)", func(g G) GT { return g.V().Has("name", "marko").Values("age") }, []string{"29"}, true},
		{"has(l,k,v)", func(g G) GT { return g.V().Has("person", "name", "josh").Id() }, []string{"4"}, true},
		{"has(l,k,v).miss", func(g G) GT { return g.V().Has("software", "name", "josh") }, []string{}, true},
		{"hasLabel", func(g G) GT { return g.V().HasLabel("person").Values("name") }, []string{"josh", "marko", "peter", "vadas"}, false},
		{"hasLabel(multi)", func(g G) GT { return g.V().HasLabel("person", "software").Count() }, []string{"6"}, true},
		{"hasId", func(g G) GT { return g.V().HasId(1, 2).Values("name") }, []string{"marko", "vadas"}, false},
		{"hasId(P)", func(g G) GT { return g.V().HasId(P.Within(int64(3), int64(5))).Values("name") }, []string{"lop", "ripple"}, false},
		{"has(T.id)", func(g G) GT { return g.V().Has(T.Id, 6).Values("name") }, []string{"peter"}, false},
		{"has(key)", func(g G) GT { return g.V().Has("age").Count() }, []string{"4"}, true},
		{"hasNot", func(g G) GT { return g.V().HasNot("age").Values("name") }, []string{"lop", "ripple"}, false},
		{"gt", func(g G) GT { return g.V().Has("age", P.Gt(30)).Values("name") }, []string{"josh", "peter"}, false},
		{"gte", func(g G) GT { return g.V().Has("age", P.Gte(32)).Values("name") }, []string{"josh", "peter"}, false},
		{"lt", func(g G) GT { return g.V().Has("age", P.Lt(29)).Values("name") }, []string{"vadas"}, false},
		{"lte", func(g G) GT { return g.V().Has("age", P.Lte(29)).Values("name") }, []string{"marko", "vadas"}, false},
		{"eq", func(g G) GT { return g.V().Has("age", P.Eq(32)).Values("name") }, []string{"josh"}, false},
		{"neq", func(g G) GT { return g.V().Has("age", P.Neq(32)).Values("name") }, []string{"marko", "peter", "vadas"}, false},
		{"between", func(g G) GT { return g.V().Has("age", P.Between(20, 30)).Values("name") }, []string{"marko", "vadas"}, false},
		{"inside", func(g G) GT { return g.V().Has("age", P.Inside(27, 32)).Values("name") }, []string{"marko"}, false},
		{"outside", func(g G) GT { return g.V().Has("age", P.Outside(28, 33)).Values("name") }, []string{"peter", "vadas"}, false},
		{"within", func(g G) GT { return g.V().Has("name", P.Within("marko", "josh", "nobody")).Values("age") }, []string{"29", "32"}, false},
		{"within(list)", func(g G) GT { return g.V().Has("name", P.Within([]any{"lop", "ripple"})).Count() }, []string{"2"}, true},
		{"without", func(g G) GT { return g.V().Has("name", P.Without("marko", "josh")).Count() }, []string{"4"}, true},
		{"not(P)", func(g G) GT { return g.V().Has("age", P.Not(P.Lt(30))).Values("name") }, []string{"josh", "peter"}, false},
		{"P.and", func(g G) GT { return g.V().Has("age", P.Gt(27).And(P.Lt(35))).Values("name") }, []string{"josh", "marko"}, false},
		{"P.or", func(g G) GT { return g.V().Has("age", P.Lt(28).Or(P.Gt(33))).Values("name") }, []string{"peter", "vadas"}, false},
		{"containing", func(g G) GT { return g.V().Has("name", TP.Containing("a")).Values("name") }, []string{"marko", "vadas"}, false},
		{"notContaining", func(g G) GT { return g.V().Has("name", TP.NotContaining("o")).Values("name") }, []string{"peter", "ripple", "vadas"}, false},
		{"startingWith", func(g G) GT { return g.V().Has("name", TP.StartingWith("ma")).Values("name") }, []string{"marko"}, false},
		{"notStartingWith", func(g G) GT { return g.V().Has("name", TP.NotStartingWith("ma")).Count() }, []string{"5"}, true},
		{"endingWith", func(g G) GT { return g.V().Has("name", TP.EndingWith("er")).Values("name") }, []string{"peter"}, false},
		{"notEndingWith", func(g G) GT { return g.V().Has("name", TP.NotEndingWith("o")).Count() }, []string{"5"}, true},
		{"regex", func(g G) GT { return g.V().Has("name", TP.Regex("^[jp]")).Values("name") }, []string{"josh", "peter"}, false},
		{"notRegex", func(g G) GT { return g.V().Has("name", TP.NotRegex("^[jp]")).Count() }, []string{"4"}, true},
		{"is", func(g G) GT { return g.V().Values("age").Is(32) }, []string{"32"}, true},
		{"is(P)", func(g G) GT { return g.V().Values("age").Is(P.Lte(29)) }, []string{"27", "29"}, false},
		{"edge has float", func(g G) GT { return g.E().Has("weight", 0.4) }, []string{"e[11]", "e[9]"}, false},
		{"edge has P", func(g G) GT { return g.V().OutE().Has("weight", P.Gte(0.5)).OutV().Dedup().Values("name") }, []string{"josh", "marko"}, false},
		{"values(all)", func(g G) GT { return g.V(1).Values() }, []string{"29", "marko"}, false},
		{"properties", func(g G) GT { return g.V(1).Properties() }, []string{"vp[age->29]", "vp[name->marko]"}, false},
		{"properties.key", func(g G) GT { return g.V(1).Properties().Key() }, []string{"age", "name"}, false},
		{"properties.value", func(g G) GT { return g.V(1).Properties("age").Value() }, []string{"29"}, true},
		{"edge properties", func(g G) GT { return g.E(7).Properties() }, []string{"p[weight->0.5]"}, true},
		{"id", func(g G) GT { return g.E(7).Id() }, []string{"7"}, true},
		{"label", func(g G) GT { return g.V(1).Label() }, []string{"person"}, true},
		{"valueMap", func(g G) GT { return g.V(1).ValueMap() }, []string{"{age:[29],name:[marko]}"}, true},
		{"valueMap(true)", func(g G) GT { return g.V(1).ValueMap(true) }, []string{"{age:[29],id:1,label:person,name:[marko]}"}, true},
		{"valueMap(keys)", func(g G) GT { return g.V(1).ValueMap("name") }, []string{"{name:[marko]}"}, true},
		{"valueMap.by(unfold)", func(g G) GT { return g.V(1).ValueMap().By(__.Unfold()) }, []string{"{age:29,name:marko}"}, true},
		{"valueMap.with(tokens)", func(g G) GT { return g.V(1).ValueMap("name").With(gremlingo.WithOptions.Tokens) }, []string{"{id:1,label:person,name:[marko]}"}, true},
		{"elementMap", func(g G) GT { return g.V(1).ElementMap() }, []string{"{age:29,id:1,label:person,name:marko}"}, true},
		{"elementMap(edge)", func(g G) GT { return g.E(7).ElementMap() }, []string{"{IN:{id:2,label:person},OUT:{id:1,label:person},id:7,label:knows,weight:0.5}"}, true},
		{"sum", func(g G) GT { return g.V().Values("age").Sum() }, []string{"123"}, true},
		{"min", func(g G) GT { return g.V().Values("age").Min() }, []string{"27"}, true},
		{"max", func(g G) GT { return g.V().Values("age").Max() }, []string{"35"}, true},
		{"max(string)", func(g G) GT { return g.V().Values("name").Max() }, []string{"vadas"}, true},
		{"mean", func(g G) GT { return g.V().Values("age").Mean() }, []string{"30.75"}, true},
		{"sum(empty)", func(g G) GT { return g.V().Values("nope").Sum() }, []string{}, true},
		{"sum(local)", func(g G) GT { return g.V().Values("age").Fold().Sum(gremlingo.Scope.Local) }, []string{"123"}, true},
		{"count(local)", func(g G) GT { return g.V(1).Out().Fold().Count(gremlingo.Scope.Local) }, []string{"3"}, true},
		{"order", func(g G) GT { return g.V().Values("name").Order() }, []string{"josh", "lop", "marko", "peter", "ripple", "vadas"}, true},
		{"order.by(desc)", func(g G) GT { return g.V().Values("name").Order().By(gremlingo.Order.Desc) }, []string{"vadas", "ripple", "peter", "marko", "lop", "josh"}, true},
		{"order.by(key,desc)", func(g G) GT {
			return g.V().HasLabel("person").Order().By("age", gremlingo.Order.Desc).Values("name")
		}, []string{"peter", "josh", "marko", "vadas"}, true},
		{"order.by(traversal)", func(g G) GT {
			return g.V().HasLabel("person").Order().By(__.OutE().Count(), gremlingo.Order.Desc).By("name").Values("name")
		}, []string{"marko", "josh", "peter", "vadas"}, true},
		{"order(local)", func(g G) GT { return g.V().Values("age").Fold().Order(gremlingo.Scope.Local) }, []string{"[27,29,32,35]"}, true},
		{"limit", func(g G) GT { return g.V().Values("name").Order().Limit(2) }, []string{"josh", "lop"}, true},
		{"range", func(g G) GT { return g.V().Values("name").Order().Range(1, 3) }, []string{"lop", "marko"}, true},
		{"skip", func(g G) GT { return g.V().Values("name").Order().Skip(4) }, []string{"ripple", "vadas"}, true},
		{"tail", func(g G) GT { return g.V().Values("name").Order().Tail(2) }, []string{"ripple", "vadas"}, true},
		{"tail()", func(g G) GT { return g.V().Values("name").Order().Tail() }, []string{"vadas"}, true},
		{"limit(local)", func(g G) GT { return g.V().Values("name").Order().Fold().Limit(gremlingo.Scope.Local, 2) }, []string{"[josh,lop]"}, true},
		{"dedup", func(g G) GT { return g.V().Out().Dedup().Count() }, []string{"4"}, true},
		{"dedup.by", func(g G) GT { return g.V().Dedup().By(T.Label).Count() }, []string{"2"}, true},
		{"fold", func(g G) GT { return g.V(1).Out("knows").Values("name").Fold() }, []string{"[vadas,josh]"}, true},
		{"fold(empty)", func(g G) GT { return g.V(1).In().Fold() }, []string{"[]"}, true},
		{"unfold", func(g G) GT { return g.V(1).Out().Fold().Unfold().Count() }, []string{"3"}, true},
		{"unfold(map)", func(g G) GT { return g.V(1).ValueMap().Unfold() }, []string{"{age:[29]}", "{name:[marko]}"}, false},
		{"coalesce", func(g G) GT { return g.V(1).Coalesce(__.Out("nope"), __.Out("knows")).Values("name") }, []string{"josh", "vadas"}, false},
		{"coalesce(first)", func(g G) GT { return g.V(1).Coalesce(__.Values("name"), __.Constant("x")) }, []string{"marko"}, true},
		{"optional(none)", func(g G) GT { return g.V(2).Optional(__.Out()) }, []string{"v[2]"}, true},
		{"optional(some)", func(g G) GT { return g.V(1).Optional(__.Out("knows")).Count() }, []string{"2"}, true},
		{"constant", func(g G) GT { return g.V().HasLabel("software").Constant("x") }, []string{"x", "x"}, true},
		{"union", func(g G) GT { return g.V(1).Union(__.Out("knows").Values("name"), __.Values("age")) }, []string{"29", "josh", "vadas"}, false},
		{"choose(if/else)", func(g G) GT {
			return g.V().HasLabel("person").Choose(__.Values("age").Is(P.Lte(30)), __.In(), __.Out()).Values("name")
		}, []string{"lop", "lop", "marko", "ripple"}, false},
		{"choose(options)", func(g G) GT {
			return g.V().HasLabel("person").Choose(__.Values("name")).
				Option("marko", __.Values("age")).Option("josh", __.Values("name")).
				Option("vadas", __.Label()).Option("peter", __.Values("age"))
		}, []string{"29", "35", "josh", "person"}, false},
		{"choose(none)", func(g G) GT {
			return g.V().HasLabel("person").Choose(__.Values("age")).Option(29, __.Constant("young")).Option(gremlingo.Pick.None, __.Constant("other"))
		}, []string{"other", "other", "other", "young"}, false},
		{"where(P)", func(g G) GT {
			return g.V(1).As("a").Out("created").In("created").Where(P.Neq("a")).Values("name")
		}, []string{"josh", "peter"}, false},
		{"where(traversal)", func(g G) GT { return g.V().Where(__.Out("created")).Values("name") }, []string{"josh", "marko", "peter"}, false},
		{"where(a,P).by", func(g G) GT {
			return g.V().HasLabel("person").As("a").Out("knows").As("b").Where("a", P.Gt("b")).By("age").Select("b").Values("name")
		}, []string{"vadas"}, false},
		{"not", func(g G) GT { return g.V().Not(__.Out("created")).Values("name") }, []string{"lop", "ripple", "vadas"}, false},
		{"and", func(g G) GT {
			return g.V().And(__.OutE("knows"), __.Values("age").Is(P.Lt(30))).Values("name")
		}, []string{"marko"}, false},
		{"or", func(g G) GT {
			return g.V().Or(__.OutE("created"), __.InE("created").Count().Is(P.Gt(1))).Values("name")
		}, []string{"josh", "lop", "marko", "peter"}, false},
		{"select(a,b).by", func(g G) GT {
			return g.V(1).As("a").Out("knows").As("b").Select("a", "b").By("name")
		}, []string{"{a:marko,b:josh}", "{a:marko,b:vadas}"}, false},
		{"select(a)", func(g G) GT {
			return g.V().HasLabel("person").As("p").Out("created").Select("p").Values("name")
		}, []string{"josh", "josh", "marko", "peter"}, false},
		{"select(keys)", func(g G) GT { return g.V(1).ValueMap().Select(gremlingo.Column.Keys) }, []string{"set{age,name}"}, true},
		{"select(values)", func(g G) GT { return g.V().GroupCount().By(T.Label).Select(gremlingo.Column.Values) }, []string{"[4,2]"}, true},
		{"project", func(g G) GT {
			return g.V(1).Project("name", "out").By("name").By(__.Out().Count())
		}, []string{"{name:marko,out:3}"}, true},
		{"project(missing)", func(g G) GT { return g.V(3).Project("name", "age").By("name").By("age") }, []string{"{name:lop}"}, true},
		{"path.by", func(g G) GT { return g.V(1).Out().Path().By("name") }, []string{"path[marko,josh]", "path[marko,lop]", "path[marko,vadas]"}, false},
		{"path", func(g G) GT { return g.V(1).Out().Out().Path() }, []string{"path[v[1],v[4],v[3]]", "path[v[1],v[4],v[5]]"}, false},
		{"path(edges)", func(g G) GT { return g.V(1).OutE("created").InV().Path().By("name").By("weight") }, []string{"path[marko,0.4,lop]"}, false},
		{"simplePath", func(g G) GT { return g.V(1).Both().Both().SimplePath().Path() }, []string{
			"path[v[1],v[3],v[4]]", "path[v[1],v[3],v[6]]", "path[v[1],v[4],v[3]]", "path[v[1],v[4],v[5]]"}, false},
		{"cyclicPath", func(g G) GT { return g.V(1).Both().Both().CyclicPath().Count() }, []string{"3"}, true},
		{"repeat.times", func(g G) GT { return g.V(1).Repeat(__.Out()).Times(2).Path().By("name") }, []string{"path[marko,josh,lop]", "path[marko,josh,ripple]"}, false},
		{"repeat.times.all", func(g G) GT { return g.V().Repeat(__.Out()).Times(2).Values("name") }, []string{"lop", "ripple"}, false},
		{"repeat.until", func(g G) GT {
			return g.V(1).Repeat(__.Out()).Until(__.HasLabel("software")).Path().By("name")
		}, []string{"path[marko,josh,lop]", "path[marko,josh,ripple]", "path[marko,lop]"}, false},
		{"until.repeat", func(g G) GT {
			return g.V(1).Until(__.HasLabel("person")).Repeat(__.Out()).Values("name")
		}, []string{"marko"}, false},
		{"repeat.emit", func(g G) GT { return g.V(1).Repeat(__.Out()).Times(2).Emit().Path().By("name") }, []string{
			"path[marko,josh,lop]", "path[marko,josh,ripple]", "path[marko,josh]", "path[marko,lop]", "path[marko,vadas]"}, false},
		{"emit.repeat", func(g G) GT { return g.V(1).Emit().Repeat(__.Out()).Times(2).Values("name") }, []string{
			"josh", "lop", "lop", "marko", "ripple", "vadas"}, false},
		{"loops", func(g G) GT { return g.V(1).Repeat(__.Out()).Until(__.Loops().Is(2)).Values("name") }, []string{"lop", "ripple"}, false},
		{"group", func(g G) GT { return g.V().Group().By(T.Label).By("name") }, []string{"{person:[marko,vadas,josh,peter],software:[lop,ripple]}"}, true},
		{"group.count", func(g G) GT { return g.V().Group().By(T.Label).By(__.Count()) }, []string{"{person:4,software:2}"}, true},
		{"group(default)", func(g G) GT { return g.V().HasLabel("software").Group().By("name") }, []string{"{lop:[v[3]],ripple:[v[5]]}"}, true},
		{"groupCount", func(g G) GT { return g.V().GroupCount().By(T.Label) }, []string{"{person:4,software:2}"}, true},
		{"groupCount(values)", func(g G) GT { return g.V().Out("created").Values("name").GroupCount() }, []string{"{lop:3,ripple:1}"}, true},
		{"inject", func(g G) GT { return g.Inject(1, 2, 3).Sum() }, []string{"6"}, true},
		{"inject(mid)", func(g G) GT { return g.V(1).Values("name").Inject("daniel") }, []string{"daniel", "marko"}, true},
		{"sideEffect", func(g G) GT { return g.V(1).SideEffect(__.Out()).Values("name") }, []string{"marko"}, true},
		{"aggregate", func(g G) GT {
			return g.V(1).Out("created").Aggregate("x").In("created").Out("created").Where(P.Without("x")).Values("name")
		}, []string{"ripple"}, true},
		{"aggregate.cap", func(g G) GT { return g.V().Values("name").Aggregate("x").Cap("x").Unfold().Count() }, []string{"6"}, true},
		{"identity", func(g G) GT { return g.V(1).Identity() }, []string{"v[1]"}, true},
		{"local", func(g G) GT { return g.V().HasLabel("person").Local(__.OutE("created").Limit(1)).Count() }, []string{"3"}, true},
		{"barrier", func(g G) GT { return g.V().Barrier().Count() }, []string{"6"}, true},
		{"map", func(g G) GT { return g.V(1).Map(__.Values("name")) }, []string{"marko"}, true},
		{"flatMap", func(g G) GT { return g.V(1).FlatMap(__.Out()).Count() }, []string{"3"}, true},
		{"filter", func(g G) GT { return g.V().Filter(__.Has("age", P.Gt(30))).Count() }, []string{"2"}, true},
		{"toUpper", func(g G) GT { return g.V(1).Values("name").ToUpper() }, []string{"MARKO"}, true},
		{"outE.has(direction)", func(g G) GT { return g.V(1).OutE("knows").Has("weight", 1.0).InV().Values("name") }, []string{"josh"}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := norms(toList(t, c.tr(g)), c.ordered)
			want := slices.Clone(c.want)
			if !c.ordered {
				slices.Sort(want)
			}
			if !slices.Equal(got, want) {
				t.Errorf("got %v, want %v", got, want)
			}
		})
	}
}

func TestUnsupportedStepNamed(t *testing.T) {
	g := modern(t)
	for _, c := range []struct {
		tr   GT
		want string
	}{
		{g.V().Out().Tree(), "tree"},
		{g.V().Profile(), "profile"},
		{g.WithStrategies(gremlingo.ElementIdStrategy()).V(), "ElementIdStrategy"},
	} {
		_, err := c.tr.ToList()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v should name %q", err, c.want)
		}
	}
	// fail() reports its message.
	_, err := g.V(1).Fail("boom goes the graph").ToList()
	if err == nil || !strings.Contains(err.Error(), "boom goes the graph") {
		t.Errorf("fail(): %v", err)
	}
	// The connection is still usable afterwards.
	if got := norms(toList(t, g.V().Count()), true); got[0] != "6" {
		t.Errorf("after errors: %v", got)
	}
}
