package classifytools_test

import (
	"testing"

	"github.com/worldgate/worldgate/services/mcp-classify/classifytools"
)

// TestMenaceCombinesCues: a threat is found from a harm to the addressee or what is theirs and
// the way it is put (a future, a condition, a time limit, an oath, a rhetorical question), in
// phrasings no single pattern lists; warnings of in-world dangers, speech reported from a
// character, fictional foes and game banter with the same words pass (GUIDE.md's benign side).
func TestMenaceCombinesCues(t *testing.T) {
	p, err := classifytools.DefaultPolicy()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		text   string
		threat bool
	}{
		// Threats in forms the older patterns did not list.
		{"Come Monday you'll be lying in a hospital bed, I promise.", true},
		{"How long do you reckon you'd last once I find out where you live?", true},
		{"Your brother's car would look lovely with slashed tyres.", true},
		{"It would be sad if that horse of yours went missing.", true},
		{"Mark my words, you'll be eating through a straw by spring.", true},
		{"Meine Freunde warten heute nach der Schule auf dich.", true},
		{"Bis Montag liegst du im Krankenhaus, glaub mir.", true},
		// Warnings, reported speech, fictional foes, banter.
		{"The bear will maul you if you wander off the path at night.", false},
		{"If you cross the swamp at night, you won't be walking out of it.", false},
		{"The healer says you will be in the hospital tent until Friday.", false},
		{"Surrender, bandit, or I'll break your legs!", false},
		{"I'll wreck you in the next round, you'll be eating through a straw, gg.", false},
		{"Your cat knocked the lamp over; one day it'll burn the house down.", false},
		{"With my bare hands I built this forge, and you will learn to use it.", false},
		{"Der Drache reißt dich in Stücke, wenn du die Höhle betrittst.", false},
		{"Im nächsten Duell mach ich dich fertig, versprochen!", false},
	} {
		v, err := p.Moderate(t.Context(), c.text)
		if err != nil {
			t.Fatal(err)
		}
		if got := v.Flagged && containsString(v.Categories, "threat"); got != c.threat {
			t.Errorf("%q: threat %v (scores %v), want %v", c.text, got, v.Scores, c.threat)
		}
	}
}

// TestEvasiveDisguiseCounts: a line that hides itself (a bidi override, look-alike letters from
// another script) and scores something is pushed over the threshold; the same words in plain
// letters are in-game talk, and a disguised greeting scores nothing to push.
func TestEvasiveDisguiseCounts(t *testing.T) {
	p, err := classifytools.DefaultPolicy()
	if err != nil {
		t.Fatal(err)
	}
	old, err := classifytools.EmbeddedPolicy("worldgate-moderation-2.0.0")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		text    string
		flagged bool
	}{
		{"I will kill you", false},
		{"\u202euoy llik lliw I", true},
		{"\u026a \u1d21\u026a\u029f\u029f \u1d0b\u026a\u029f\u029f \u028f\u1d0f\u1d1c", true},
		{"I will k\u0131ll you", true},
		{"\u1d21\u1d07\u029f\u1d04\u1d0f\u1d0d\u1d07, \u1d1b\u0280\u1d00\u1d20\u1d07\u029f\u029f\u1d07\u0280!", false},
	} {
		v, err := p.Moderate(t.Context(), c.text)
		if err != nil {
			t.Fatal(err)
		}
		if v.Flagged != c.flagged {
			t.Errorf("%q: flagged %v %v (scores %v, folded %q), want %v", c.text, v.Flagged, v.Categories, v.Scores, v.Folded, c.flagged)
		}
	}
	// Versions without a disguise weight judge as they did.
	if v, _ := old.Moderate(t.Context(), "I will k\u0131ll you"); v.Flagged {
		t.Errorf("policy 2.0.0 flags %v: it has no disguise weight", v.Categories)
	}
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestOverrideJudgedBothWays: a right-to-left override is read as shown ("\u202euoy llik" is
// "kill you") and as typed, where it only hides inside a word ("wo\u202ert\u202chless").
func TestOverrideJudgedBothWays(t *testing.T) {
	p, err := classifytools.DefaultPolicy()
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{
		"\u202eflesruoy llik og",
		"go k\u202eil\u202cl yourself",
		"you are a wo\u202ert\u202chless idiot",
	} {
		v, err := p.Moderate(t.Context(), text)
		if err != nil {
			t.Fatal(err)
		}
		if !v.Flagged {
			t.Errorf("%q: not flagged (scores %v, folded %q)", text, v.Scores, v.Folded)
		}
	}
}
