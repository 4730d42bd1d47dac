package processor

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/worldgate/worldgate/shared/textstats"
)

// The window's figures, kept up to date as texts enter and leave, equal the same figures
// computed afresh over the window's texts after every commit, evictions included.
func TestTextWindowFiguresEqualRecomputed(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	words := []string{"the", "gate", "is", "open", "closed", "fog", "rolls", "in", "ale", "cold"}
	const size = 20
	w := newTextWindow()
	var items []committedText
	next := 0
	for i := 0; i < 500; i++ {
		var b []string
		for range 1 + rng.IntN(6) {
			b = append(b, words[rng.IntN(len(words))])
		}
		text := strings.Join(b, " ")
		ct := committedText{text: text, words: strings.Join(textstats.Words(text), " "), player: fmt.Sprintf("player:%d", rng.IntN(3)),
			lore: rng.IntN(2) == 0, grams: [3][]string{nil, textstats.NGrams(text, 1), textstats.NGrams(text, 2)}}
		if len(items) < size {
			items = append(items, ct)
		} else {
			w.count(items[next], -1)
			items[next] = ct
			next = (next + 1) % size
		}
		w.count(ct, +1)

		texts := make([]string, len(items))
		grounded := 0
		players := map[string]map[string]bool{}
		for j, it := range items {
			texts[j] = it.text
			if it.lore {
				grounded++
			}
			if players[it.words] == nil {
				players[it.words] = map[string]bool{}
			}
			players[it.words][it.player] = true
		}
		repeated := 0
		for _, it := range items {
			if len(players[it.words]) > 1 {
				repeated++
			}
		}
		for n := 1; n <= 2; n++ {
			if got, want := w.distinct(n), textstats.DistinctN(texts, n); got != want {
				t.Fatalf("commit %d: distinct-%d %v, recomputed %v", i, n, got, want)
			}
		}
		if w.grounded != grounded || w.repeated != repeated {
			t.Fatalf("commit %d: grounded %d repeated %d, recomputed %d %d", i, w.grounded, w.repeated, grounded, repeated)
		}
	}
}
