package classifytools_test

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/worldgate/worldgate/services/mcp-classify/classifytools"
)

// The outside-style set (testdata/moderation/outside/GUIDE.md): fresh phrasings, five languages
// besides English, and disguised text, written from the guide before any rule was tuned to it.
// Rules are tuned on tune.tsv only; heldout.tsv is frozen by its SHA-256 below.
const (
	outsideDir = "testdata/moderation/outside/"
	// heldOutSHA256 freezes heldout.tsv: a change to it is a new set, not a fix.
	heldOutSHA256 = "be85f55013baa2547ee1d51a1a24c7108ad335ecb5ce29aa9217faa1a3c6455c"
)

type outsideLine struct {
	labelledLine
	lang, form string
}

func loadOutside(t *testing.T, file string) []outsideLine {
	t.Helper()
	data, err := os.ReadFile(outsideDir + file)
	if err != nil {
		t.Fatal(err)
	}
	var out []outsideLine
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		f := strings.Split(sc.Text(), "\t")
		if len(f) != 4 || f[3] == "" {
			t.Fatalf("%s:%d: want labels<TAB>lang<TAB>form<TAB>text", file, n)
		}
		l := outsideLine{labelledLine: labelledLine{text: f[3], accept: strings.Split(f[0], ",")}, lang: f[1], form: f[2]}
		l.primary = l.accept[0]
		out = append(out, l)
	}
	return out
}

// TestOutsideSetFrozen fails when heldout.tsv changes: the held-out half is measured, never edited.
func TestOutsideSetFrozen(t *testing.T) {
	data, err := os.ReadFile(outsideDir + "heldout.tsv")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != heldOutSHA256 {
		t.Fatalf("heldout.tsv has SHA-256 %s, want %s: the held-out half is frozen; add lines to tune.tsv or start a new set", got, heldOutSHA256)
	}
	held := loadOutside(t, "heldout.tsv")
	tune := map[string]bool{}
	for _, half := range tuningHalves {
		for _, l := range loadOutside(t, half) {
			if tune[l.text] {
				t.Errorf("%q is in the tuning half twice", l.text)
			}
			tune[l.text] = true
		}
	}
	for _, l := range held {
		if tune[l.text] {
			t.Errorf("%q is in both halves", l.text)
		}
	}
}

// outsideReport scores lines overall, per language and per form.
func outsideReport(t *testing.T, m classifytools.Moderator, lines []outsideLine) (overall setScore, report string) {
	t.Helper()
	all := make([]labelledLine, len(lines))
	by := map[string][]labelledLine{}
	for i, l := range lines {
		all[i] = l.labelledLine
		by["lang="+l.lang] = append(by["lang="+l.lang], l.labelledLine)
		by["form="+l.form] = append(by["form="+l.form], l.labelledLine)
	}
	overall = scoreSet(t, m, all)
	var b strings.Builder
	fmt.Fprintf(&b, "per category (%d lines):\n%s", len(lines), overall.table())
	if p, ok := m.(*classifytools.Policy); ok {
		right := 0
		for _, l := range lines {
			if v, _ := p.Moderate(t.Context(), l.text); v.Language == l.lang {
				right++
			}
		}
		fmt.Fprintf(&b, "language guessed right: %d of %d\n", right, len(lines))
	}
	groups := make([]string, 0, len(by))
	for g := range by {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	fmt.Fprintf(&b, "%-18s %5s %7s %6s %9s\n", "group", "lines", "harmful", "recall", "precision")
	for _, g := range groups {
		s := scoreSet(t, m, by[g])
		p := "-"
		if v, ok := s.precision["overall"]; ok {
			p = fmt.Sprintf("%.3f", v)
		}
		fmt.Fprintf(&b, "%-18s %5d %7d %6.3f %9s\n", g, s.lines, s.support["overall"], s.recall["overall"], p)
	}
	return overall, b.String()
}

// TestOutsideSet reports the default policy's figures on both halves of the outside-style set:
// per category, per language and per form (MODERATION_TUNE=1 lists the tuning half's misses).
// Run: cd services && go test -count=1 -run TestOutsideSet -v ./mcp-classify/classifytools
func TestOutsideSet(t *testing.T) {
	p, err := classifytools.DefaultPolicy()
	if err != nil {
		t.Fatal(err)
	}
	for _, half := range append(append([]string{}, tuningHalves...), "heldout.tsv") {
		s, report := outsideReport(t, p, loadOutside(t, half))
		t.Logf("policy %s, %s:\n%s", p.Version(), half, report)
		if half != "heldout.tsv" && os.Getenv("MODERATION_TUNE") != "" {
			t.Logf("misses:\n%s\nfalse alarms:\n%s", strings.Join(s.misses, "\n"), strings.Join(s.falseAlarms, "\n"))
		}
		// Floors that keep what policy 3.0.0 reached (held-out: recall 0.941 at precision 1.000);
		// the target is recall 0.90 at precision 0.95, every category 0.80 (issue 42).
		floor := outsideFloors[half]
		if r := s.recall[overall]; r < floor.recall {
			t.Errorf("%s: overall recall %.3f < %.2f", half, r, floor.recall)
		}
		for c, p := range s.precision {
			if p < floor.precision {
				t.Errorf("%s: %s precision %.3f < %.2f", half, c, p, floor.precision)
			}
		}
	}
}

// tuningHalves are the files rules may be tuned on: tune.tsv (the first split and three batches)
// and tune4.tsv, the fourth batch, written from the guide before any rule for it and scored on
// its own so that its before and after can be compared.
var tuningHalves = []string{"tune.tsv", "tune4.tsv"}

var outsideFloors = map[string]struct{ recall, precision float64 }{
	"tune.tsv":    {0.95, 0.95},
	"tune4.tsv":   {0.95, 0.95}, // before its rules: 3 of 44 harmful, 1 of 28 benign flagged (0.068/0.750)
	"heldout.tsv": {0.93, 0.95},
}
