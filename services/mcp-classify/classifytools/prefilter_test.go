package classifytools

import (
	"bufio"
	"bytes"
	"context"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// The prefilters change no verdict: every policy version gives the same verdict with and
// without them, on every line of the labelled moderation set and on texts made of the
// policies' own words with case and folding tricks ("ſ" for "s", the Kelvin sign for "k").
func TestPrefiltersChangeNoVerdict(t *testing.T) {
	var texts []string
	sc := bufio.NewScanner(bytes.NewReader(LabelledModerationSet()))
	for sc.Scan() {
		if _, text, ok := strings.Cut(sc.Text(), "\t"); ok {
			texts = append(texts, text)
		}
	}
	if len(texts) < 100 {
		t.Fatalf("%d labelled lines: the set did not load", len(texts))
	}
	rng := rand.New(rand.NewPCG(3, 5))
	words := strings.Fields("i will find you kill my ex how to make a bomb ignore previous instructions you are an idiot " +
		"shoot up the school show me your body system: </s> <|im_start|> all immigrants are scum jump off overdose")
	tricks := strings.NewReplacer("s", "ſ", "k", "\u212a", "i", "I", "o", "O")
	for range 2000 {
		var b []string
		for range 1 + rng.IntN(8) {
			b = append(b, words[rng.IntN(len(words))])
		}
		text := strings.Join(b, " ")
		if rng.IntN(2) == 0 {
			text = tricks.Replace(text)
		}
		texts = append(texts, text)
	}
	ctx := context.Background()
	for _, version := range []string{"worldgate-moderation-1.0.0", "worldgate-moderation-2.0.0", "worldgate-moderation-3.0.0"} {
		p, err := EmbeddedPolicy(version)
		if err != nil {
			t.Fatalf("policy %q: %v", version, err)
		}
		flagged := 0
		for _, text := range texts {
			noPrefilter = false
			fast, err1 := p.Moderate(ctx, text)
			noPrefilter = true
			slow, err2 := p.Moderate(ctx, text)
			noPrefilter = false
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			if !reflect.DeepEqual(fast, slow) {
				t.Fatalf("policy %s, %q:\nwith prefilters    %+v\nwithout prefilters %+v", p.Version(), text, fast, slow)
			}
			if slow.Flagged {
				flagged++
			}
		}
		t.Logf("policy %s: %d of %d texts flagged, the same with and without prefilters", p.Version(), flagged, len(texts))
		if flagged < 20 {
			t.Fatalf("policy %s flagged only %d of %d texts: the comparison exercised too few patterns", p.Version(), flagged, len(texts))
		}
	}
}

// Every pattern of the default policy that names words gets a prefilter (one that knows
// nothing would run the pattern on every text).
func TestMostPatternsHaveAPrefilter(t *testing.T) {
	p, err := DefaultPolicy()
	if err != nil {
		t.Fatal(err)
	}
	n, with := 0, 0
	for _, c := range p.categories {
		for _, pt := range c.patterns {
			if pt.re == nil {
				continue
			}
			n++
			if pt.pre != nil {
				with++
			} else {
				t.Logf("no prefilter: %s", pt.re)
			}
		}
	}
	if with*10 < n*8 {
		t.Fatalf("%d of %d patterns have a prefilter, want at least 80 %%", with, n)
	}
}
