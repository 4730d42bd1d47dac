package main

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"os"
)

// demoScenario is the demo's world events, one compact envelope per line; the missing envelope
// fields (ids, times) are filled at publish time so every run is new.
//
//go:embed demo/scenario.jsonl
var demoScenario []byte

// runDemo publishes the demo scenario.
func (st *stack) runDemo(ctx context.Context) (int, error) {
	p := &publisher{js: st.js, fill: true, source: "worldgate-dev/demo", out: os.Stderr}
	sc := bufio.NewScanner(bytes.NewReader(demoScenario))
	next := func() (string, bool, error) {
		if !sc.Scan() {
			return "", false, sc.Err()
		}
		return sc.Text(), true, nil
	}
	p.out = discardUnless(st.f.jsonOut)
	if err := p.run(ctx, next); err != nil {
		return 0, fmt.Errorf("publish demo scenario: %w", err)
	}
	return p.published, nil
}
