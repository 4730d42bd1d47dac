package replay

import (
	"math"
	"testing"
)

func TestDistinctN(t *testing.T) {
	for _, tc := range []struct {
		texts []string
		n     int
		want  float64
	}{
		{[]string{"A b, a B."}, 1, 2.0 / 4},                         // a b a b: 2 distinct of 4
		{[]string{"a b a b"}, 2, 2.0 / 3},                           // "a b", "b a", "a b"
		{[]string{"the smith nods", "the smith waves"}, 2, 3.0 / 4}, // bigrams do not cross texts
		{[]string{"one"}, 2, 0},
		{nil, 1, 0},
	} {
		if got := DistinctN(tc.texts, tc.n); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("DistinctN(%q, %d) = %v, want %v", tc.texts, tc.n, got, tc.want)
		}
	}
}
