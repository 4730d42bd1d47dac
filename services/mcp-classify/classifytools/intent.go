package classifytools

import (
	"context"
	"sort"
	"strings"
)

// Intents the classifier returns.
var Intents = []string{"greet", "farewell", "ask_about", "trade", "threaten", "quest", "other"}

// IntentResult is a classification.
type IntentResult struct {
	Intent       string        `json:"intent" jsonschema:"one of greet, farewell, ask_about, trade, threaten, quest, other"`
	Confidence   float64       `json:"confidence" jsonschema:"0..1"`
	Alternatives []IntentScore `json:"alternatives" jsonschema:"other intents that matched, best first"`
	Classifier   string        `json:"classifier" jsonschema:"classifier name and version"`
}

// IntentScore is one candidate intent.
type IntentScore struct {
	Intent     string  `json:"intent"`
	Confidence float64 `json:"confidence"`
}

// IntentClassifier classifies an utterance. The default is the deterministic
// keyword classifier; a model-backed one can be plugged in later.
type IntentClassifier interface {
	ClassifyIntent(ctx context.Context, utterance string) (IntentResult, error)
}

// KeywordClassifier is a small deterministic classifier: weighted cue phrases
// per intent, the best total wins, confidence = best / (best + runner-up + 1)
// scaled to 0.35..0.95. Same input, same output.
type KeywordClassifier struct{}

const keywordClassifierVersion = "keyword-intent-1.0.0"

var intentCues = map[string]map[string]float64{
	"greet":     {"hello": 2, "hi": 2, "hey": 2, "greetings": 2, "good morning": 2, "good evening": 2, "good day": 2, "well met": 2, "hail": 1.5, "howdy": 2},
	"farewell":  {"bye": 2, "goodbye": 2.5, "farewell": 2.5, "see you": 2, "until next time": 2, "take care": 1.5, "i must go": 2, "i'll be going": 2, "good night": 1.5},
	"ask_about": {"what": 1, "who": 1, "where": 1, "why": 1, "how": 0.8, "when": 1, "which": 0.8, "tell me about": 2.5, "do you know": 2, "have you heard": 2, "what is": 1, "explain": 1.5, "?": 1},
	"trade":     {"buy": 2.5, "sell": 2.5, "trade": 2.5, "barter": 2.5, "price": 2, "cost": 1.5, "how much": 2, "gold": 1, "coins": 1, "coin": 1, "wares": 2, "deal": 1, "offer": 1, "purchase": 2.5},
	"threaten":  {"kill you": 3, "i'll kill": 3, "i will kill": 3, "or else": 2.5, "die": 1.5, "hurt you": 2.5, "destroy you": 2.5, "you'll regret": 2.5, "threat": 1.5, "burn your": 2.5, "cut you": 2.5, "last warning": 2.5},
	"quest":     {"quest": 3, "task": 2, "job": 1.5, "mission": 2.5, "adventure": 2, "any work": 2.5, "need help": 1.5, "can i help": 2.5, "bounty": 2.5, "reward": 1.5, "errand": 2.5},
}

// ClassifyIntent implements IntentClassifier.
func (KeywordClassifier) ClassifyIntent(_ context.Context, utterance string) (IntentResult, error) {
	norm := " " + normalize(utterance) + " "
	scores := map[string]float64{}
	for intent, cues := range intentCues {
		for cue, w := range cues {
			if cue == "?" {
				if strings.Contains(utterance, "?") {
					scores[intent] += w
				}
				continue
			}
			if strings.Contains(norm, " "+cue+" ") {
				scores[intent] += w
			}
		}
	}
	var ranked []IntentScore
	for intent, s := range scores {
		ranked = append(ranked, IntentScore{Intent: intent, Confidence: s})
	}
	sort.Slice(ranked, func(i, j int) bool {
		if ranked[i].Confidence != ranked[j].Confidence {
			return ranked[i].Confidence > ranked[j].Confidence
		}
		return ranked[i].Intent < ranked[j].Intent
	})
	res := IntentResult{Intent: "other", Confidence: 0.5, Alternatives: []IntentScore{}, Classifier: keywordClassifierVersion}
	if len(ranked) == 0 {
		return res, nil
	}
	best := ranked[0].Confidence
	second := 0.0
	if len(ranked) > 1 {
		second = ranked[1].Confidence
	}
	conf := func(s float64) float64 { return round2(0.35 + 0.6*s/(best+second+1)) }
	res.Intent = ranked[0].Intent
	res.Confidence = conf(best)
	for _, r := range ranked[1:] {
		res.Alternatives = append(res.Alternatives, IntentScore{Intent: r.Intent, Confidence: conf(r.Confidence)})
	}
	return res, nil
}
