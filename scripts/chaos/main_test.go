package main

import (
	"bytes"
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/worldgate/worldgate/shared/slowtest"
)

// TestSmoke runs every component as its own process (the gates in one) on a three-node NATS
// cluster (R3 streams and buckets, each component its own NATS user), kills three of them while
// events flow, one a NATS node (the leader of a stream), and checks that nothing was lost or
// duplicated.
func TestSmoke(t *testing.T) {
	slowtest.Skip(t, "end-to-end (chaos on the process stack and a three-node NATS cluster)")
	o, err := parse([]string{"-duration", "12s", "-kills", "3", "-nats-share", "0.34", "-rate", "25", "-players", "100", "-down-max", "1s",
		"-settle", "90s", "-seed", "7", "-split-gates=false", "-data-dir", t.TempDir()}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	res, err := chaos(ctx, o, &progress)
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	var out bytes.Buffer
	printResult(&out, res)
	t.Logf("\n%s", out.String())
	a := res.Audit
	if len(res.Kills) < 3 || res.ByKind["nats"] != 1 || res.NATSNodes != 3 {
		t.Errorf("%d kills (%v) on %d NATS nodes, want 3 with one of a NATS node, on 3", len(res.Kills), res.ByKind, res.NATSNodes)
	}
	if a.Lost != 0 || a.Duplicated != 0 || a.GraphMismatch != 0 {
		t.Errorf("lost %d, duplicated %d, graph mismatch %d: %v", a.Lost, a.Duplicated, a.GraphMismatch, a.Examples)
	}
	// One event-processor keeps each player's moves in order across its crashes.
	if a.OrderViolations != 0 || res.Processors != 1 || !strings.Contains(out.String(), "order violations 0") {
		t.Errorf("%d order violations with %d event-processor replicas: %v", a.OrderViolations, res.Processors, a.OrderExamples)
	}
	if a.Events != 300 || a.Committed+a.Rejected != a.Events {
		t.Errorf("%d events, %d committed + %d rejected", a.Events, a.Committed, a.Rejected)
	}
	// Each refusal the stale view does not explain comes with an example, ten at most.
	if others := a.Rejected - a.RejectedStale; len(a.RejectedExamples) != min(others, 10) {
		t.Errorf("%d refusals not explained by a stale view, %d examples: %v", others, len(a.RejectedExamples), a.RejectedExamples)
	}
}

// TestParse reads the replica and kill-share flags and refuses shares that do not add up.
func TestParse(t *testing.T) {
	o, err := parse(nil, &bytes.Buffer{})
	if err != nil || o.procs != 1 || o.procShare != 0 || o.natsShare != 0.25 {
		t.Errorf("defaults: %d processors, processor share %g, NATS share %g, %v; want 1, 0, 0.25", o.procs, o.procShare, o.natsShare, err)
	}
	o, err = parse([]string{"-processors", "3", "-processor-share", "0.3", "-nats-share", "0.2"}, &bytes.Buffer{})
	if err != nil || o.procs != 3 || o.procShare != 0.3 || o.natsShare != 0.2 {
		t.Errorf("-processors 3 -processor-share 0.3 -nats-share 0.2: %+v, %v", o, err)
	}
	for _, args := range [][]string{
		{"-processors", "0"},
		{"-processor-share", "-0.1"},
		{"-processor-share", "0.8", "-nats-share", "0.3"},
		{"-processor-share", "1.5", "-nats-share", "0"},
	} {
		if _, err := parse(args, &bytes.Buffer{}); err == nil {
			t.Errorf("parse %v: want an error", args)
		}
	}
}

// A run of 30 kills aimed as the cluster check asks (≥ 8 at event-processor replicas, ≥ 5
// at NATS nodes) gets them, spread over the run, one per window.
func TestKillSlots(t *testing.T) {
	for _, tc := range []struct {
		kills                int
		natsShare, procShare float64
		nats, procs          int
	}{
		{kills: 30, natsShare: 0.2, procShare: 0.3, nats: 6, procs: 9},
		{kills: 30, natsShare: 0.25, procShare: 0.3, nats: 8, procs: 9},
		{kills: 20, natsShare: 0.25, procShare: 0, nats: 5, procs: 0},
		{kills: 4, natsShare: 0.5, procShare: 0.5, nats: 2, procs: 2},
		{kills: 3, natsShare: 0.34, procShare: 0.66, nats: 1, procs: 2},
	} {
		d := time.Minute
		slots := killSlots(rand.New(rand.NewPCG(7, 0)), tc.kills, d, tc.natsShare, tc.procShare)
		got := map[int]int{}
		for i, s := range slots {
			got[s.aim]++
			width := d / time.Duration(tc.kills)
			if s.at < time.Duration(i)*width || s.at >= time.Duration(i+1)*width {
				t.Errorf("kill %d of %d at %s: outside its window", i, tc.kills, s.at)
			}
		}
		if len(slots) != tc.kills || got[aimNATS] != tc.nats || got[aimProcessor] != tc.procs || got[aimAny] != tc.kills-tc.nats-tc.procs {
			t.Errorf("%d kills, NATS share %g, processor share %g: %d slots aimed %v; want %d at NATS nodes, %d at replicas",
				tc.kills, tc.natsShare, tc.procShare, len(slots), got, tc.nats, tc.procs)
		}
	}
}
