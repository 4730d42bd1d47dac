package textstats_test

import (
	"fmt"
	"testing"

	"github.com/worldgate/worldgate/shared/textstats"
)

func TestDistinctN(t *testing.T) {
	for _, c := range []struct {
		name  string
		texts []string
		n     int
		want  float64
	}{
		{"nothing", nil, 1, 0},
		{"too short for bigrams", []string{"Hello"}, 2, 0},
		{"all distinct", []string{"the bell rang"}, 1, 1},
		{"a repeated line", []string{"The bell rang.", "the BELL rang!"}, 1, 0.5},
		{"bigrams do not cross texts", []string{"a b", "b a"}, 2, 1},
		{"repeated bigram", []string{"the tide the tide"}, 2, 2.0 / 3},
		{"digits are words", []string{"berth 4", "berth 5"}, 1, 3.0 / 4},
	} {
		if got := textstats.DistinctN(c.texts, c.n); fmt.Sprintf("%.6f", got) != fmt.Sprintf("%.6f", c.want) {
			t.Errorf("%s: DistinctN(%q, %d) = %.4f, want %.4f", c.name, c.texts, c.n, got, c.want)
		}
	}
}

func ExampleDistinctN() {
	lines := []string{"Fresh crab, two a penny!", "Fresh crab, two a penny!", "Sold out, come back tomorrow."}
	fmt.Printf("distinct-1 %.2f, distinct-2 %.2f\n", textstats.DistinctN(lines, 1), textstats.DistinctN(lines, 2))
	// Output: distinct-1 0.67, distinct-2 0.67
}

func TestVariety(t *testing.T) {
	same := []string{"Next!", "Next.", "next", "NEXT"}
	if v := textstats.Variety(same); v != 0.25 {
		t.Errorf("Variety(%q) = %.3f, want 0.25 (single words: distinct-1)", same, v)
	}
	varied := []string{"The tide turns at noon.", "Mind the oil on the stairs.", "Sold out, come back tomorrow."}
	if v := textstats.Variety(varied); v != 1 {
		t.Errorf("Variety(%q) = %.3f, want 1", varied, v)
	}
	repeated := []string{"The tide turns at noon.", "The tide turns at noon.", "The tide turns at noon.", "The tide turns at noon."}
	if v := textstats.Variety(repeated); v != 0.25 {
		t.Errorf("Variety(%q) = %.3f, want 0.25", repeated, v)
	}
}
