package classifytools_test

import (
	"bufio"
	"context"
	"fmt"
	"hash/fnv"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/worldgate/worldgate/services/mcp-classify/classifytools"
)

// The labelled moderation set (testdata/moderation/README.md): one line per sentence,
// "labels<TAB>text", labels a comma-separated list whose first entry is the category the line
// must be flagged for ("benign": must not be flagged) and whose further entries are categories
// that are also acceptable for it (a threat is also harassment).
const labelledSet = "testdata/moderation/labelled.tsv"

type labelledLine struct {
	text    string
	primary string
	accept  []string // primary first
}

// heldOut is the stable split: the FNV-1a 64-bit hash of the line's text, odd → held-out.
// Tuning looks only at the other half (MODERATION_TUNE=1 prints that half's misses only).
func heldOut(text string) bool {
	h := fnv.New64a()
	h.Write([]byte(text))
	return h.Sum64()%2 == 1
}

func loadLabelled(t *testing.T) (tune, held []labelledLine) {
	t.Helper()
	f, err := os.Open(labelledSet)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		n++
		labels, text, ok := strings.Cut(sc.Text(), "\t")
		if !ok || text == "" {
			t.Fatalf("%s:%d: want labels<TAB>text", labelledSet, n)
		}
		l := labelledLine{text: text, accept: strings.Split(labels, ",")}
		l.primary = l.accept[0]
		if heldOut(text) {
			held = append(held, l)
		} else {
			tune = append(tune, l)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return tune, held
}

// setScore is recall and precision per category and overall (flagged vs benign).
type setScore struct {
	lines               int
	recall, precision   map[string]float64
	support             map[string]int
	misses, falseAlarms []string
}

const overall = "overall"

// The bar the policy must meet on both halves.
const (
	minRecall    = 0.85
	minPrecision = 0.95
)

func scoreSet(t *testing.T, m classifytools.Moderator, lines []labelledLine) setScore {
	t.Helper()
	tp, pred, support := map[string]int{}, map[string]int{}, map[string]int{}
	predOK := map[string]int{}
	s := setScore{lines: len(lines), recall: map[string]float64{}, precision: map[string]float64{}, support: support}
	for _, l := range lines {
		v, err := m.Moderate(context.Background(), l.text)
		if err != nil {
			t.Fatal(err)
		}
		harmful := l.primary != "benign"
		if harmful {
			support[overall]++
			support[l.primary]++
			if slices.Contains(v.Categories, l.primary) {
				tp[l.primary]++
			} else {
				s.misses = append(s.misses, fmt.Sprintf("%-18s %v %q", l.primary, v.Categories, l.text))
			}
		}
		if v.Flagged {
			pred[overall]++
			if harmful {
				tp[overall]++
				predOK[overall]++
			} else {
				s.falseAlarms = append(s.falseAlarms, fmt.Sprintf("%v %v %q", v.Categories, v.Scores, l.text))
			}
		}
		for _, c := range v.Categories {
			pred[c]++
			if slices.Contains(l.accept, c) {
				predOK[c]++
			} else if harmful {
				s.falseAlarms = append(s.falseAlarms, fmt.Sprintf("%s on a %s line %q", c, l.primary, l.text))
			}
		}
	}
	for c, n := range support {
		s.recall[c] = float64(tp[c]) / float64(n)
	}
	for c, n := range pred {
		s.precision[c] = float64(predOK[c]) / float64(n)
	}
	return s
}

func (s setScore) table() string {
	cats := make([]string, 0, len(s.support))
	for c := range s.support {
		cats = append(cats, c)
	}
	for c := range s.precision {
		if _, ok := s.support[c]; !ok {
			cats = append(cats, c)
		}
	}
	sort.Strings(cats)
	var b strings.Builder
	fmt.Fprintf(&b, "%-18s %7s %6s %9s\n", "category", "support", "recall", "precision")
	for _, c := range cats {
		p := "-"
		if v, ok := s.precision[c]; ok {
			p = fmt.Sprintf("%.3f", v)
		}
		fmt.Fprintf(&b, "%-18s %7d %6.3f %9s\n", c, s.support[c], s.recall[c], p)
	}
	return b.String()
}

// TestModerationSet grades the embedded policy on the labelled set, both halves.
func TestModerationSet(t *testing.T) {
	p, err := classifytools.DefaultPolicy()
	if err != nil {
		t.Fatal(err)
	}
	tune, held := loadLabelled(t)
	if len(tune) < 200 || len(held) < 200 {
		t.Fatalf("split %d/%d: each half should hold at least 200 lines", len(tune), len(held))
	}
	for _, half := range []struct {
		name  string
		lines []labelledLine
	}{{"tuning", tune}, {"held-out", held}} {
		s := scoreSet(t, p, half.lines)
		t.Logf("policy %s, %s half (%d lines):\n%s", p.Version(), half.name, s.lines, s.table())
		if half.name == "tuning" && os.Getenv("MODERATION_TUNE") != "" {
			t.Logf("misses:\n%s\nfalse alarms:\n%s", strings.Join(s.misses, "\n"), strings.Join(s.falseAlarms, "\n"))
		}
		// The bar: recall >= 0.85 at precision >= 0.95, overall and per category, on both halves.
		for c, r := range s.recall {
			if r < minRecall {
				t.Errorf("%s half: %s recall %.3f < %.2f", half.name, c, r, minRecall)
			}
		}
		for c, p := range s.precision {
			if p < minPrecision {
				t.Errorf("%s half: %s precision %.3f < %.2f", half.name, c, p, minPrecision)
			}
		}
		for c := range s.support {
			if _, ok := s.precision[c]; !ok {
				t.Errorf("%s half: %s never flagged", half.name, c)
			}
		}
	}
}
