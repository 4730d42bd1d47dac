package main

import (
	"bytes"
	"context"
	"testing"
	"time"
)

// TestSmoke runs every component as its own process (the gates in one) on a three-node NATS
// cluster (R3 streams and buckets, each component its own NATS user), kills three of them while
// events flow, one a NATS node (the leader of a stream), and checks that nothing was lost or
// duplicated.
func TestSmoke(t *testing.T) {
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
	if a.Events != 300 || a.Committed+a.Rejected != a.Events {
		t.Errorf("%d events, %d committed + %d rejected", a.Events, a.Committed, a.Rejected)
	}
}
