package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestSmoke runs a small bench on the embedded stack: the ceiling, a saturation phase and a
// half-rate phase of moves, every event committed, figures printed.
func TestSmoke(t *testing.T) {
	o, err := parse([]string{"-n", "200", "-players", "100", "-warmup", "50", "-ceiling-n", "2000", "-data-dir", t.TempDir()}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	fig, err := bench(ctx, o, &progress)
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	if fig.CeilingPerS <= 0 || fig.HopLimited != fig.CeilingPerS/6 {
		t.Errorf("ceiling %.0f/s, hop-limited %.0f/s: want a positive ceiling divided by the 6 hops of a move", fig.CeilingPerS, fig.HopLimited)
	}
	if len(fig.Phases) != 2 {
		t.Fatalf("phases %+v, want saturation then half rate", fig.Phases)
	}
	for _, p := range fig.Phases {
		if p.Committed != 200 || p.Rejected != 0 {
			t.Errorf("%s: %d committed, %d rejected; want all 200 moves committed", p.Name, p.Committed, p.Rejected)
		}
		if p.CommittedPerS <= 0 || p.P50ms <= 0 || p.P99ms < p.P50ms || p.CeilingShare <= 0 {
			t.Errorf("%s: implausible figures %+v", p.Name, p)
		}
	}
	if want := fig.Phases[0].CommittedPerS / 2; fig.Phases[1].TargetRate != want {
		t.Errorf("half-rate phase ran at %.1f/s, want %.1f/s", fig.Phases[1].TargetRate, want)
	}
	if fig.DeadLetters != 0 || fig.PeakRSSBytes <= 0 || fig.CPUSeconds <= 0 {
		t.Errorf("dead letters %d, peak RSS %d, CPU %.1fs", fig.DeadLetters, fig.PeakRSSBytes, fig.CPUSeconds)
	}
	var out bytes.Buffer
	printFigures(&out, fig)
	for _, want := range []string{"committed/s", "p99", "hop-limited ceiling", "peak RSS"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("figures lack %q:\n%s", want, out.String())
		}
	}
	t.Logf("\n%s", out.String())
}
