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
				hs.Gates = append(hs.Gates, scoreGate(g, byGate[g]))
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
