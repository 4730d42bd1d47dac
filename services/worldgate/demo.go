package main

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"fmt"

	"github.com/worldgate/worldgate/shared/natsx/natsauth"
)

// demoScenario is the demo's world events, one compact envelope per line; the missing envelope
// fields (ids, times) are filled at publish time so every run is new.
//
//go:embed demo/scenario.jsonl
var demoScenario []byte

// demoGriefer says the scenario's hostile lines (a threat, a prompt injection): the input rail
// flags them, and three flags within an hour make a repeat offender, so they are not said by
// the players one plays in the console or the guide, whom reruns of the demo would otherwise
// restrict.
const demoGriefer = "player:grim"

// demoRepeat is published once the scenario has gone through: a request of the scenario again,
// as a new event, so the AI cache serves it. It is a quest seed request, whose context has not
// changed since: a repeated conversation would not be served from the cache, because the NPC
// now remembers the first exchange (get-recent-dialogue is part of the context hash).
//
//go:embed demo/repeat.jsonl
var demoRepeat []byte

// runDemo publishes the demo scenario, waits for the pipeline to go idle, then repeats a few
// of its events.
func (st *devStack) runDemo(ctx context.Context) (int, error) {
	n, err := st.publishDemo(ctx, demoScenario)
	if err != nil {
		return n, err
	}
	idle, cancel := context.WithTimeout(ctx, st.f.idleTimeout)
	defer cancel()
	if err := st.WaitIdle(idle); err != nil {
		return n, err
	}
	m, err := st.publishDemo(ctx, demoRepeat)
	return n + m, err
}

func (st *devStack) publishDemo(ctx context.Context, lines []byte) (int, error) {
	_, js, err := st.ConnectAs(natsauth.Publisher) // as a game backend would
	if err != nil {
		return 0, err
	}
	p := &publisher{js: js, fill: true, source: "worldgate-dev/demo", out: discardUnless(st.f.jsonOut)}
	sc := bufio.NewScanner(bytes.NewReader(lines))
	next := func() (string, bool, error) {
		if !sc.Scan() {
			return "", false, sc.Err()
		}
		return sc.Text(), true, nil
	}
	if err := p.run(ctx, next); err != nil {
		return 0, fmt.Errorf("publish demo scenario: %w", err)
	}
	return p.published, nil
}
