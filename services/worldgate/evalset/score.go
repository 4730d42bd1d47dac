package evalset

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"text/tabwriter"
)

// HalfScore grades the gates on one half of the set.
type HalfScore struct {
	Half  string      `json:"half"`
	Cases int         `json:"cases"`
	Gates []GateScore `json:"gates"`
}

// GateScore is one gate's precision and recall of rejection on a half: a true positive is a
// case labelled rejected that the gate rejected, a false positive one labelled passed that it
// rejected. Precision is 1 when the gate rejected nothing.
type GateScore struct {
	Gate       string          `json:"gate"`
	Cases      int             `json:"cases"`
	TP         int             `json:"truePositives"`
	FP         int             `json:"falsePositives"`
	FN         int             `json:"falseNegatives"`
	TN         int             `json:"trueNegatives"`
	Precision  float64         `json:"precision"`
	Recall     float64         `json:"recall"`
	Categories []CategoryScore `json:"categories"`
	// Groups grades the safety gate per moderation set, and on the outside-style set per
	// language and per category (GroupScore); absent for the other gates.
	Groups []GroupScore `json:"groups,omitempty"`
}

// GroupScore grades the safety gate on a group of its cases: a moderation set ("labelled",
// "outside"), or the outside-style set's lines of one language ("outside lang=de") or one
// category ("outside threat"). Recall is the share of its harmful lines rejected for their
// category (or one they also accept), Precision the share of its rejections that were of harmful
// lines (1 when none was rejected), PassRate the share of its benign lines passed.
type GroupScore struct {
	Group     string   `json:"group"`
	Cases     int      `json:"cases"`
	Harmful   int      `json:"harmful"`
	Right     int      `json:"right"` // harmful lines caught and benign lines passed
	Caught    int      `json:"caught"`
	Rejected  int      `json:"rejected"`
	Recall    *float64 `json:"recall,omitempty"` // nil without harmful lines
	Precision float64  `json:"precision"`
	PassRate  *float64 `json:"passRate,omitempty"` // nil without benign lines
}

// CategoryScore grades one category. For a category labelled rejected, Recall is the share of
// its cases rejected for it (or for a category they also accept) and Precision the share of the
// gate's rejections naming it that were labelled with it (nil when none named it; dedup names
// one category, near_duplicate). For a category labelled passed, PassRate is the share passed.
type CategoryScore struct {
	Category  string   `json:"category"`
	Expect    string   `json:"expect"`
	Cases     int      `json:"cases"`
	Right     int      `json:"right"`
	Recall    *float64 `json:"recall,omitempty"`
	Precision *float64 `json:"precision,omitempty"`
	PassRate  *float64 `json:"passRate,omitempty"`
}

// Score grades verdicts per half, gate and category.
func Score(vs []Verdict) []HalfScore {
	var out []HalfScore
	for _, h := range []Half{Tuning, HeldOutHalf} {
		hs := HalfScore{Half: h.String()}
		byGate := map[string][]Verdict{}
		for _, v := range vs {
			if v.Case.HeldOut == (h == HeldOutHalf) {
				byGate[v.Gate] = append(byGate[v.Gate], v)
				hs.Cases++
			}
		}
		for _, g := range []string{GateInvariant, GateDedup, GateSafety} {
			if len(byGate[g]) > 0 {
				gs := scoreGate(g, byGate[g])
				if g == GateSafety {
					gs.Groups = scoreGroups(byGate[g])
				}
				hs.Gates = append(hs.Gates, gs)
			}
		}
		out = append(out, hs)
	}
	return out
}

func ratio(n, d int) float64 {
	if d == 0 {
		return 1
	}
	return float64(n) / float64(d)
}

func ptr(f float64) *float64 { return &f }

func scoreGate(gate string, vs []Verdict) GateScore {
	s := GateScore{Gate: gate, Cases: len(vs)}
	type tally struct{ cases, right, named, namedOK int }
	cats := map[string]*tally{}
	expect := map[string]string{}
	at := func(c string) *tally {
		if cats[c] == nil {
			cats[c] = &tally{}
		}
		return cats[c]
	}
	for _, v := range vs {
		wantReject, rejected := v.Case.Expect == Rejected, v.Outcome == Rejected
		switch {
		case wantReject && rejected:
			s.TP++
		case wantReject:
			s.FN++
		case rejected:
			s.FP++
		default:
			s.TN++
		}
		t := at(v.Case.Category)
		expect[v.Case.Category] = v.Case.Expect
		t.cases++
		if v.Right() {
			t.right++
		}
		accept := append([]string{v.Case.Category}, v.Case.Accept...)
		for _, c := range v.For {
			at(c).named++
			if slices.Contains(accept, c) && wantReject {
				at(c).namedOK++
			}
		}
	}
	s.Precision, s.Recall = ratio(s.TP, s.TP+s.FP), ratio(s.TP, s.TP+s.FN)
	names := make([]string, 0, len(cats))
	for c := range cats {
		names = append(names, c)
	}
	sort.Slice(names, func(i, j int) bool {
		if expect[names[i]] != expect[names[j]] {
			return expect[names[i]] > expect[names[j]] // rejected categories first
		}
		return names[i] < names[j]
	})
	for _, c := range names {
		t := cats[c]
		cs := CategoryScore{Category: c, Expect: expect[c], Cases: t.cases, Right: t.right}
		switch expect[c] {
		case Rejected:
			cs.Recall = ptr(ratio(t.right, t.cases))
		case Passed:
			cs.PassRate = ptr(ratio(t.right, t.cases))
		default:
			cs.Expect = "-" // named by a rejection, labelled on no case of this half
		}
		if t.named > 0 {
			cs.Precision = ptr(ratio(t.namedOK, t.named))
		}
		s.Categories = append(s.Categories, cs)
	}
	return s
}

// scoreGroups grades safety verdicts per moderation set, and the outside-style set's per language
// and per category, in that order.
func scoreGroups(vs []Verdict) []GroupScore {
	type tally struct{ cases, harmful, caught, rejected, rejectedHarmful, benign, passed int }
	groups := map[string]*tally{}
	var sets, langs, cats []string
	add := func(list *[]string, name string, v Verdict) {
		t := groups[name]
		if t == nil {
			t = &tally{}
			groups[name] = t
			*list = append(*list, name)
		}
		t.cases++
		harmful := v.Case.Expect == Rejected
		if harmful {
			t.harmful++
			if v.Right() {
				t.caught++
			}
		} else {
			t.benign++
			if v.Outcome == Passed {
				t.passed++
			}
		}
		if v.Outcome == Rejected {
			t.rejected++
			if harmful {
				t.rejectedHarmful++
			}
		}
	}
	for _, v := range vs {
		if v.Case.Source == "" {
			continue
		}
		add(&sets, v.Case.Source, v)
		if v.Case.Lang != "" {
			add(&langs, v.Case.Source+" lang="+v.Case.Lang, v)
		}
		if v.Case.Source == SetOutside {
			add(&cats, v.Case.Source+" "+v.Case.Category, v)
		}
	}
	var out []GroupScore
	for _, list := range [][]string{sets, langs, cats} {
		sort.Strings(list)
		for _, name := range list {
			t := groups[name]
			g := GroupScore{Group: name, Cases: t.cases, Harmful: t.harmful, Right: t.caught + t.passed, Caught: t.caught, Rejected: t.rejected,
				Precision: ratio(t.rejectedHarmful, t.rejected)}
			if t.harmful > 0 {
				g.Recall = ptr(ratio(t.caught, t.harmful))
			}
			if t.benign > 0 {
				g.PassRate = ptr(ratio(t.passed, t.benign))
			}
			out = append(out, g)
		}
	}
	return out
}

// Print writes the scores as tables.
func Print(w io.Writer, scores []HalfScore) error {
	f := func(p *float64) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprintf("%.3f", *p)
	}
	for _, h := range scores {
		fmt.Fprintf(w, "%s half (%d cases)\n", h.Half, h.Cases)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "gate\tcategory\texpect\tcases\tright\tprecision\trecall\tpass rate\t\n")
		for _, g := range h.Gates {
			fmt.Fprintf(tw, "%s\t(all)\t\t%d\t%d\t%.3f\t%.3f\t\t\n", g.Gate, g.Cases, g.TP+g.TN, g.Precision, g.Recall)
			for _, c := range g.Categories {
				fmt.Fprintf(tw, "\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t\n", c.Category, c.Expect, c.Cases, c.Right, f(c.Precision), f(c.Recall), f(c.PassRate))
			}
			for _, gr := range g.Groups {
				fmt.Fprintf(tw, "\t[%s]\t\t%d\t%d\t%.3f\t%s\t%s\t\n", gr.Group, gr.Cases, gr.Right, gr.Precision, f(gr.Recall), f(gr.PassRate))
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	return nil
}

// The bar each gate must meet on both halves: invariant and dedup precision and recall of
// rejection >= 0.90 (#20), safety recall >= 0.85 at precision >= 0.95 (#21 item 5).
var bar = map[string]struct{ Precision, Recall float64 }{
	GateInvariant: {0.90, 0.90},
	GateDedup:     {0.90, 0.90},
	GateSafety:    {0.95, 0.85},
}

// BelowBar lists, as sentences, each gate below its bar on a half.
func BelowBar(scores []HalfScore) []string {
	var out []string
	for _, h := range scores {
		for _, g := range h.Gates {
			b := bar[g.Gate]
			if g.Precision < b.Precision || g.Recall < b.Recall {
				out = append(out, fmt.Sprintf("%s half, %s gate: precision %.3f recall %.3f, the bar is precision >= %.2f and recall >= %.2f",
					h.Half, g.Gate, g.Precision, g.Recall, b.Precision, b.Recall))
			}
		}
	}
	return out
}
