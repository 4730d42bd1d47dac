package harness

import (
	"bufio"
	"strings"
	"testing"

	"github.com/worldgate/worldgate/events"
)

// Answers tells the outcomes apart (issue 41 item 2): new content, reused content, fallback,
// refused and skipped, in all and per proposal kind, each event counted by its first outcome.
func TestAnswersTellOutcomesApart(t *testing.T) {
	tr := &Tracker{answers: map[string][]Answer{
		"e1": {{Kind: events.OutcomeCommitted, Of: events.KindQuestSeed}},
		"e2": {{Kind: events.OutcomeReused, Of: events.KindQuestSeed}},
		"e3": {{Kind: events.OutcomeFallback, Of: events.KindQuestSeed}},
		"e4": {{Kind: events.OutcomeSkipped, Of: "ambience"}},
		"e5": {{Kind: events.OutcomeRefused, Of: events.KindNPCDialogue, Gate: "safety", Code: "SAFETY_FLAGGED", OnFallback: true}},
		"e6": {{Kind: events.OutcomeReused, Of: events.KindNPCDialogue}, {Kind: events.OutcomeCommitted, Of: events.KindNPCDialogue}},
	}}
	a := tr.Answers([]string{"e1", "e2", "e3", "e4", "e5", "e6", "e7"})
	if a.Answered != 6 || a.Silent != 1 || a.Committed != 1 || a.Reused != 2 || a.Fallback != 1 || a.Skipped != 1 || a.Refused != 1 || a.Abandoned != 1 {
		t.Fatalf("answers %+v", a)
	}
	q := a.ByKind[events.KindQuestSeed]
	if q == nil || *q != (KindAnswers{Committed: 1, Reused: 1, Fallback: 1}) {
		t.Fatalf("quest seeds %+v", q)
	}
	if d := a.ByKind[events.KindNPCDialogue]; d == nil || *d != (KindAnswers{Reused: 1, Refused: 1}) {
		t.Fatalf("dialogue %+v", d)
	}
	if a.Of(events.OutcomeReused) != 2 || a.Share(a.Fallback) != 1.0/6 {
		t.Fatalf("Of %d, Share %v", a.Of(events.OutcomeReused), a.Share(a.Fallback))
	}
}

// MetricSumBy reads what bench reports of the ai-worker's spend: per purpose, or all summed.
func TestSumByLabel(t *testing.T) {
	text := `# TYPE worldgate_ai_requests_total counter
worldgate_ai_requests_total{model="m",outcome="ok",provider="scripted",purpose="quest_seed"} 3
worldgate_ai_requests_total{model="m",outcome="ok",provider="scripted",purpose="npc_dialogue"} 2
worldgate_ai_requests_total{model="m",outcome="timeout",provider="scripted",purpose="quest_seed"} 1
worldgate_ai_requests_totally 9
`
	by, ok := sumBy(bufio.NewScanner(strings.NewReader(text)), "worldgate_ai_requests_total", "purpose")
	if !ok || by["quest_seed"] != 4 || by["npc_dialogue"] != 2 || len(by) != 2 {
		t.Fatalf("by purpose %v (%v)", by, ok)
	}
	all, _ := sumBy(bufio.NewScanner(strings.NewReader(text)), "worldgate_ai_requests_total", "")
	if all[""] != 6 {
		t.Fatalf("all %v", all)
	}
}
