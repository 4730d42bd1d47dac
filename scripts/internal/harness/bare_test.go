package harness

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
)

// An event answered by an outcome that names no proposal (the ai-worker's reuse
// short-circuit, issue 41) is decided: bench's closed loop waits on it (WaitDecided) and
// counts it, instead of waiting for a proposal that never comes.
func TestEventAnsweredWithoutProposalIsDecided(t *testing.T) {
	env := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tr, err := StartTracker(ctx, env.JS, "run-")
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Stop()
	o := &events.Outcome{SchemaVersion: events.OutcomeSchemaVersion, OutcomeID: events.OutcomeID("reused", "e1/quest-writer"), Kind: events.OutcomeReused,
		EventID: "e1", CorrelationID: "run-1", ProposalKind: events.KindQuestSeed, AgentRole: "quest-writer",
		Actor: events.Actor{Kind: "player", ID: "player:ada"}, Reuse: &events.Reuse{ProposalID: "p0", EventID: events.DomainEventID("p0", 0),
			AcceptedUTC: time.Now().UTC(), Payload: json.RawMessage(`{"questId":"quest:q","locationId":"loc:a","title":"T","hook":"H","objectives":["O"]}`)},
		DecidedUTC: time.Now().UTC()}
	raw, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.JS.Publish(ctx, o.Subject(), raw); err != nil {
		t.Fatal(err)
	}
	if err := tr.WaitDecided(ctx, "run-1"); err != nil {
		t.Fatalf("the event answered without a proposal is not decided: %v", err)
	}
	if c := tr.Counts(); c.DecidedCorrs != 1 {
		t.Fatalf("decided events %d, want 1", c.DecidedCorrs)
	}
	if a := tr.Answers([]string{"run-1"}); a.Reused != 1 || a.ByKind[events.KindQuestSeed] == nil {
		t.Fatalf("answers %+v", a)
	}
}
