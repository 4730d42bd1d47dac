package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/promql/parser"
	"gopkg.in/yaml.v3"

	"github.com/worldgate/worldgate/services/worldgate/stack"
	"github.com/worldgate/worldgate/shared/slowtest"
)

// The monitoring artefacts this test holds to what the workers really export.
const (
	metricsDoc    = "../../docs/metrics.md"
	dashboardGlob = "../../deploy/grafana/dashboards/*.json"
	rulesGlob     = "../../deploy/prometheus/rules/*.yml"

	docBegin = "<!-- BEGIN GENERATED: services/worldgate/monitoring_test.go -->"
	docEnd   = "<!-- END GENERATED -->"
)

// requiredMetrics is ARCHITECTURE.md's list (Telemetry), with the labels each must carry.
var requiredMetrics = map[string][]string{
	"worldgate_ai_requests_total":             {"purpose", "provider", "model", "outcome"},
	"worldgate_ai_tokens_total":               {"purpose", "model", "type"},
	"worldgate_ai_cost_usd_total":             {"purpose", "model"},
	"worldgate_ai_latency_seconds":            {"purpose", "model"},
	"worldgate_ai_tool_calls":                 {"purpose"},
	"worldgate_ai_cache_hits_total":           {"purpose"},
	"worldgate_ai_cache_misses_total":         {"purpose"},
	"worldgate_mcp_tool_calls_total":          {"server", "tool", "outcome"},
	"worldgate_mcp_tool_latency_seconds":      {"server", "tool"},
	"worldgate_gate_decisions_total":          {"gate", "kind", "outcome", "code"},
	"worldgate_gate_latency_seconds":          {"gate"},
	"worldgate_proposals_committed_total":     {"kind"},
	"worldgate_pipeline_latency_seconds":      {"kind"},
	"worldgate_moderation_flagged_total":      {"category"},
	"worldgate_deadletter_total":              {"stage", "reason"},
	"worldgate_consumer_pending_messages":     {"stream", "consumer"},
	"worldgate_consumer_ack_pending_messages": {"stream", "consumer"},
	"worldgate_handler_messages_total":        {"handler", "outcome"},
	"worldgate_handler_latency_seconds":       {"handler"},
	"worldgate_commit_rejections_total":       {"kind", "code"},
	"worldgate_ai_tool_budget_exceeded_total": {"purpose"},
	"worldgate_ai_fallbacks_total":            {"purpose", "cause"},
	// Diversity of committed content (#20 item 4): bounded labels, never an NPC or player id.
	"worldgate_content_distinct_ratio":             {"purpose", "n"},
	"worldgate_content_lore_grounded_ratio":        {"purpose"},
	"worldgate_dialogue_cross_player_repeat_ratio": {},
	"worldgate_npc_stale_ratio":                    {},
	"worldgate_npcs_heard":                         {},
}

// unboundedLabels are label names that would carry ids: never allowed on a Worldgate metric.
var unboundedLabels = regexp.MustCompile(`(?i)(^|_)(ids?|uuid|correlation|causation|proposal|player|npc|actor|user|sequence|seq)(_|$)`)

// TestMonitoring runs the demo on the in-process stack once, then checks against what its
// registry and its /metrics endpoint really export that:
//   - every metric of ARCHITECTURE.md exists with its labels, names and units are consistent
//     and no label can carry an id;
//   - docs/metrics.md lists exactly these metrics (WORLDGATE_UPDATE_DOCS=1 rewrites it);
//   - every metric and label named by a PromQL expression of the Grafana dashboards and the
//     Prometheus rules is exported (recording rules count as defined), so no panel can rot;
//   - the demo spent money on a priced model and was rejected at several gates.
func TestMonitoring(t *testing.T) {
	slowtest.Skip(t, "end-to-end (the dev stack and its demo: every metric, dashboard and rule)")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	st := startDemoStack(ctx, t)

	cat, err := catalogOf(st.Reg)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("catalog", func(t *testing.T) { checkCatalog(t, cat) })
	t.Run("doc", func(t *testing.T) { checkDoc(t, cat) })
	t.Run("endpoint", func(t *testing.T) { checkEndpoint(t, st, cat) })
	t.Run("no rot", func(t *testing.T) { checkQueries(t, cat) })
	t.Run("demo", func(t *testing.T) { checkDemoSeries(t, cat) })
}

// metricInfo is one metric family as the workers register it.
type metricInfo struct {
	Name, Type, Help string
	Labels           []string
	Series           int // series after the demo
	values           []seriesValue
}

type seriesValue struct {
	labels map[string]string
	value  float64
}

var descPattern = regexp.MustCompile(`^Desc\{fqName: ("(?:[^"\\]|\\.)*"), help: ("(?:[^"\\]|\\.)*"), unit: "(?:[^"\\]|\\.)*", constLabels: \{([^}]*)\}, variableLabels: \{([^}]*)\}\}$`)

// catalogOf lists the Worldgate metrics registered on reg: names, help and labels from the
// descriptors (so metrics without series yet are there too), types and series from a gather.
func catalogOf(reg *stack.Registry) (map[string]*metricInfo, error) {
	cat := map[string]*metricInfo{}
	for _, c := range reg.Registered() {
		descs := make(chan *prometheus.Desc, 16)
		go func() { c.Describe(descs); close(descs) }()
		for d := range descs {
			m := descPattern.FindStringSubmatch(d.String())
			if m == nil {
				return nil, fmt.Errorf("cannot read the descriptor %s", d)
			}
			name, _ := strconv.Unquote(m[1])
			help, _ := strconv.Unquote(m[2])
			if m[3] != "" {
				return nil, fmt.Errorf("%s has constant labels {%s}: put them in the scrape configuration instead", name, m[3])
			}
			var labels []string
			if m[4] != "" {
				labels = strings.Split(m[4], ",")
			}
			slices.Sort(labels)
			cat[name] = &metricInfo{Name: name, Help: help, Labels: labels, Type: vecType(c)}
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		return nil, err
	}
	for _, mf := range mfs {
		info := cat[mf.GetName()]
		if info == nil {
			continue // the Go runtime and process collectors
		}
		info.Type = strings.ToLower(mf.GetType().String())
		info.Series = len(mf.GetMetric())
		for _, m := range mf.GetMetric() {
			sv := seriesValue{labels: map[string]string{}, value: m.GetCounter().GetValue() + m.GetGauge().GetValue()}
			for _, lp := range m.GetLabel() {
				sv.labels[lp.GetName()] = lp.GetValue()
			}
			info.values = append(info.values, sv)
		}
	}
	for name, info := range cat {
		if info.Type == "" {
			return nil, fmt.Errorf("the type of %s is unknown: it has no series after the demo and is not a metric vector", name)
		}
	}
	return cat, nil
}

// vecType is the type of a metric vector, which has no series before its first use. (A plain
// metric always has one, typed by Gather; its interfaces cannot tell it apart anyway: a Gauge is
// also a Counter, a Summary also a Histogram.)
func vecType(c prometheus.Collector) string {
	switch c.(type) {
	case *prometheus.CounterVec:
		return "counter"
	case *prometheus.GaugeVec:
		return "gauge"
	case *prometheus.HistogramVec:
		return "histogram"
	case *prometheus.SummaryVec:
		return "summary"
	}
	return ""
}

func checkCatalog(t *testing.T, cat map[string]*metricInfo) {
	for name, labels := range requiredMetrics {
		info := cat[name]
		if info == nil {
			t.Errorf("%s is not exported by any worker of worldgate dev", name)
			continue
		}
		want := slices.Sorted(slices.Values(labels))
		if !slices.Equal(info.Labels, want) {
			t.Errorf("%s has labels %v, want %v", name, info.Labels, want)
		}
	}
	for name, info := range cat {
		if !strings.HasPrefix(name, "worldgate_") {
			t.Errorf("%s lacks the worldgate_ prefix", name)
		}
		if info.Help == "" {
			t.Errorf("%s has no help text", name)
		}
		switch {
		case info.Type == "counter" && !strings.HasSuffix(name, "_total"):
			t.Errorf("counter %s does not end in _total", name)
		case info.Type != "counter" && strings.HasSuffix(name, "_total"):
			t.Errorf("%s %s ends in _total, which is for counters", info.Type, name)
		case strings.Contains(name, "latency") && !strings.HasSuffix(name, "_seconds"):
			t.Errorf("%s measures time but does not end in _seconds", name)
		}
		for _, l := range info.Labels {
			if unboundedLabels.MatchString(l) {
				t.Errorf("%s has label %q, which would carry ids: labels must have a bounded set of values", name, l)
			}
		}
	}
}

var mdEscape = strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;")

// catalogMarkdown is the generated part of docs/metrics.md.
func catalogMarkdown(cat map[string]*metricInfo) string {
	var b strings.Builder
	b.WriteString(docBegin + "\n")
	b.WriteString("| metric | type | labels | what it means |\n| --- | --- | --- | --- |\n")
	for _, name := range sortedKeys(cat) {
		info := cat[name]
		labels := make([]string, len(info.Labels))
		for i, l := range info.Labels {
			labels[i] = "`" + l + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", name, info.Type, strings.Join(labels, ", "), mdEscape.Replace(info.Help))
	}
	b.WriteString(docEnd)
	return b.String()
}

func checkDoc(t *testing.T, cat map[string]*metricInfo) {
	raw, err := os.ReadFile(metricsDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	begin, end := strings.Index(doc, docBegin), strings.Index(doc, docEnd)
	if begin < 0 || end < begin {
		t.Fatalf("%s lacks the markers %q and %q around the generated table", metricsDoc, docBegin, docEnd)
	}
	want := doc[:begin] + catalogMarkdown(cat) + doc[end+len(docEnd):]
	if want == doc {
		return
	}
	if os.Getenv("WORLDGATE_UPDATE_DOCS") != "" {
		if err := os.WriteFile(metricsDoc, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote %s", metricsDoc)
		return
	}
	t.Errorf("docs/metrics.md does not list the metrics the workers register; regenerate it with\n"+
		"  cd services && WORLDGATE_UPDATE_DOCS=1 go test ./worldgate -run TestMonitoring/doc -count=1\nwant:\n%s", catalogMarkdown(cat))
}

// checkEndpoint: worldgate dev's admin port serves every metric of the in-process workers.
func checkEndpoint(t *testing.T, st *devStack, cat map[string]*metricInfo) {
	url, _ := st.Endpoints["metrics.url"].(string)
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	for _, name := range sortedKeys(cat) {
		if cat[name].Series > 0 && !strings.Contains(string(body), "\n# TYPE "+name+" ") {
			t.Errorf("%s has series in the registry but %s does not serve it", name, url)
		}
	}
}

// A query names a metric in a panel or rule of a file.
type query struct{ where, expr string }

var (
	grafanaRange = regexp.MustCompile(`\$__(rate_interval|interval|range)\b`)
	grafanaVar   = regexp.MustCompile(`\$\{?\w+\}?`)
	labelValues  = regexp.MustCompile(`^label_values\((.+),\s*(\w+)\)$`)
)

// promQL turns a Grafana query into PromQL: ranges become 5m, variables (only ever used in
// regular-expression matchers) match everything.
func promQL(expr string) string {
	return grafanaVar.ReplaceAllString(grafanaRange.ReplaceAllString(expr, "5m"), ".*")
}

// A labelRead is a dashboard variable listing the values of a metric's label.
type labelRead struct{ where, metric, label string }

// dashboardQueries returns every panel target and templating query of the dashboards, and the
// labels that label_values() variables read from a metric.
func dashboardQueries(t *testing.T) (qs []query, reads []labelRead) {
	files, _ := filepath.Glob(dashboardGlob)
	if len(files) < 3 {
		t.Fatalf("want the AI cost, Rejections and Pipeline dashboards in %s, found %v", dashboardGlob, files)
	}
	type panel struct {
		Title   string  `json:"title"`
		Panels  []panel `json:"panels"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	}
	var d struct {
		Title     string  `json:"title"`
		Panels    []panel `json:"panels"`
		Templates struct {
			List []struct {
				Name  string          `json:"name"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		d.Panels, d.Templates.List = nil, nil
		if err := json.Unmarshal(raw, &d); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		n := 0
		var walk func(ps []panel)
		walk = func(ps []panel) {
			for _, p := range ps {
				for _, tg := range p.Targets {
					qs = append(qs, query{fmt.Sprintf("%s, panel %q", filepath.Base(file), p.Title), tg.Expr})
					n++
				}
				walk(p.Panels)
			}
		}
		walk(d.Panels)
		if n == 0 {
			t.Errorf("%s has no queries", file)
		}
		for _, v := range d.Templates.List {
			var q struct{ Query string }
			if json.Unmarshal(v.Query, &q) != nil {
				_ = json.Unmarshal(v.Query, &q.Query)
			}
			if m := labelValues.FindStringSubmatch(q.Query); m != nil {
				where := fmt.Sprintf("%s, variable %s", filepath.Base(file), v.Name)
				qs = append(qs, query{where, m[1]})
				reads = append(reads, labelRead{where, m[1], m[2]})
			}
		}
	}
	return qs, reads
}

// ruleQueries returns every rule expression and the names recording rules define.
func ruleQueries(t *testing.T) (qs []query, recorded map[string]bool) {
	files, _ := filepath.Glob(rulesGlob)
	if len(files) == 0 {
		t.Fatalf("no rule files match %s", rulesGlob)
	}
	recorded = map[string]bool{}
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var rf struct {
			Groups []struct {
				Rules []struct{ Record, Alert, Expr string }
			}
		}
		if err := yaml.Unmarshal(raw, &rf); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, g := range rf.Groups {
			for _, r := range g.Rules {
				qs = append(qs, query{fmt.Sprintf("%s, rule %s%s", filepath.Base(file), r.Record, r.Alert), r.Expr})
				if r.Record != "" {
					recorded[r.Record] = true
				}
			}
		}
	}
	return qs, recorded
}

// exported maps every series name Prometheus would store from a scrape to its labels:
// histograms as _bucket (with le), _sum and _count; job and instance are the target's.
func exported(cat map[string]*metricInfo) map[string][]string {
	target := []string{"job", "instance"}
	out := map[string][]string{"up": target} // written by Prometheus for every target
	for name, info := range cat {
		labels := append(slices.Clone(info.Labels), target...)
		switch info.Type {
		case "histogram", "summary":
			out[name+"_sum"], out[name+"_count"] = labels, labels
			if info.Type == "histogram" {
				out[name+"_bucket"] = append(slices.Clone(labels), "le")
			} else {
				out[name] = append(slices.Clone(labels), "quantile")
			}
		default:
			out[name] = labels
		}
	}
	return out
}

func checkQueries(t *testing.T, cat map[string]*metricInfo) {
	dq, reads := dashboardQueries(t)
	rq, recorded := ruleQueries(t)
	known := exported(cat)
	checked := 0
	for _, q := range append(dq, rq...) {
		expr, err := parser.ParseExpr(promQL(q.expr))
		if err != nil {
			t.Errorf("%s: %q is not valid PromQL: %v", q.where, q.expr, err)
			continue
		}
		for _, problem := range unknownNames(expr, known, recorded) {
			t.Errorf("%s: %s\n  in %s", q.where, problem, q.expr)
		}
		checked++
	}
	for _, r := range reads {
		if labels, ok := known[r.metric]; ok && !slices.Contains(labels, r.label) {
			t.Errorf("%s lists the values of label %q, which %s does not have", r.where, r.label, r.metric)
		}
	}
	t.Logf("%d PromQL expressions (%d from dashboards, %d from rules) name only exported metrics and labels", checked, len(dq), len(rq))
}

// unknownNames lists the metrics an expression selects that nothing exports, the labels it
// matches on that its metric lacks, and the labels it aggregates by that none of the metrics
// it aggregates carries.
func unknownNames(expr parser.Expr, known map[string][]string, recorded map[string]bool) []string {
	var problems []string
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		switch n := node.(type) {
		case *parser.VectorSelector:
			if n.Name == "" {
				problems = append(problems, "a selector without a metric name")
				return nil
			}
			if recorded[n.Name] {
				return nil
			}
			labels, ok := known[n.Name]
			if !ok {
				problems = append(problems, fmt.Sprintf("metric %s is not exported by any worker", n.Name))
				return nil
			}
			for _, m := range n.LabelMatchers {
				if m.Name != "__name__" && !slices.Contains(labels, m.Name) {
					problems = append(problems, fmt.Sprintf("metric %s has no label %q", n.Name, m.Name))
				}
			}
		case *parser.AggregateExpr:
			if n.Without || len(n.Grouping) == 0 {
				return nil
			}
			var inner []string
			opaque := false // a recorded series: its labels are the rule's business
			parser.Inspect(n.Expr, func(node parser.Node, _ []parser.Node) error {
				if vs, ok := node.(*parser.VectorSelector); ok {
					opaque = opaque || recorded[vs.Name]
					inner = append(inner, known[vs.Name]...)
				}
				return nil
			})
			for _, g := range n.Grouping {
				if !opaque && !slices.Contains(inner, g) {
					problems = append(problems, fmt.Sprintf("%s by (%s): no metric it aggregates has label %q", n.Op, strings.Join(n.Grouping, ", "), g))
				}
			}
		}
		return nil
	})
	return problems
}

// checkDemoSeries: after the demo, a scrape shows money spent and rejections at several gates.
func checkDemoSeries(t *testing.T, cat map[string]*metricInfo) {
	// The demo commits dialogue: its distinct-1 and distinct-2 are measured, within (0, 1].
	distinct := map[string]float64{}
	for _, s := range cat["worldgate_content_distinct_ratio"].values {
		distinct[s.labels["purpose"]+" distinct-"+s.labels["n"]] = s.value
	}
	for _, k := range []string{"npc_dialogue distinct-1", "npc_dialogue distinct-2"} {
		if v, ok := distinct[k]; !ok || v <= 0 || v > 1 {
			t.Errorf("after the demo, %s is %v (measured: %v); want a value in (0, 1]", k, v, ok)
		}
	}
	t.Logf("diversity after the demo: %v", distinct)
	var cost float64
	for _, s := range cat["worldgate_ai_cost_usd_total"].values {
		cost += s.value
	}
	if cost <= 0 {
		t.Errorf("worldgate_ai_cost_usd_total is %v after the demo; the scripted model is priced, so it must be above 0", cost)
	}
	gates := map[string]bool{}
	for _, s := range cat["worldgate_gate_decisions_total"].values {
		if s.labels["outcome"] == "rejected" && s.value > 0 {
			gates[s.labels["gate"]] = true
		}
	}
	// invariant, dedup and rate; the hostile line is refused by the input rail before the model
	// (worldgate_ai_input_rail_total), so the safety gate has nothing left to refuse in the demo.
	if len(gates) < 3 {
		t.Errorf("the demo has rejection series for gates %v; want at least 3 gates", sortedKeys(gates))
	}
	blocked := 0.0
	for _, s := range cat["worldgate_ai_input_rail_total"].values {
		if s.labels["outcome"] == "blocked" {
			blocked += s.value
		}
	}
	if blocked == 0 {
		t.Errorf("the demo's hostile line was not blocked by the input rail")
	}
	t.Logf("demo: $%.6f spent; rejections at gates %v", cost, sortedKeys(gates))
}

func TestUnknownNamesFindsWhatWouldRot(t *testing.T) {
	cat := map[string]*metricInfo{
		"worldgate_gate_decisions_total":     {Type: "counter", Labels: []string{"code", "gate", "kind", "outcome"}},
		"worldgate_pipeline_latency_seconds": {Type: "histogram", Labels: []string{"kind"}},
	}
	recorded := map[string]bool{"gate:worldgate_gate_rejections:rate5m": true}
	for _, c := range []struct {
		expr string
		want []string // substrings of the problems, in order; none for a clean expression
	}{
		{`sum by (gate, code) (rate(worldgate_gate_decisions_total{outcome="rejected",gate=~"$gate"}[$__rate_interval]))`, nil},
		{`histogram_quantile(0.95, sum by (kind, le) (rate(worldgate_pipeline_latency_seconds_bucket[5m])))`, nil},
		{`sum by (gate) (gate:worldgate_gate_rejections:rate5m) / sum(up{job="gate"})`, nil},
		{`rate(worldgate_gate_decision_total[5m])`, []string{"metric worldgate_gate_decision_total is not exported"}},
		{`worldgate_pipeline_latency_seconds{kind="x"}`, []string{"metric worldgate_pipeline_latency_seconds is not exported"}},
		{`sum(worldgate_gate_decisions_total{reason="x"})`, []string{`has no label "reason"`}},
		{`sum by (stage) (rate(worldgate_gate_decisions_total[5m]))`, []string{`no metric it aggregates has label "stage"`}},
		{`histogram_quantile(0.5, sum by (le) (rate(worldgate_pipeline_latency_seconds_count[5m])))`, []string{`has label "le"`}},
	} {
		expr, err := parser.ParseExpr(promQL(c.expr))
		if err != nil {
			t.Fatalf("%s: %v", c.expr, err)
		}
		got := unknownNames(expr, exported(cat), recorded)
		if len(got) != len(c.want) {
			t.Errorf("%s: problems %q, want %d matching %q", c.expr, got, len(c.want), c.want)
			continue
		}
		for i, w := range c.want {
			if !strings.Contains(got[i], w) {
				t.Errorf("%s: problem %q, want it to say %q", c.expr, got[i], w)
			}
		}
	}
}
