package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/events/route"
	"github.com/worldgate/worldgate/services/gate/gates"
	"github.com/worldgate/worldgate/services/worldgate/stack"
	"github.com/worldgate/worldgate/services/worldgate/worldfile"
	"github.com/worldgate/worldgate/shared/natsx/natsauth"
	"github.com/worldgate/worldgate/shared/runtime"
	"github.com/worldgate/worldgate/shared/tracing"
)

// demoWorld loads the demo world the first time a data directory is used.
var demoWorld = stack.Part{Name: "demo world", Start: loadDemoWorldOnce}

// devGateConfig is the gates' configuration under dev: the demo's chattiest player should meet
// the rate gate, so dev uses short windows and a small per-player dialogue budget; production
// budgets come from the gate service's flags.
func devGateConfig() gates.Config {
	cfg := gates.DefaultConfig()
	cfg.Rate.Window = 10 * time.Second
	cfg.Rate.Budgets[events.KindNPCDialogue] = gates.Budget{ActorCount: 4, ActorCostUSD: 0.05, GlobalCount: 600, GlobalCostUSD: 5}
	return cfg
}

// loadDemoWorldOnce sends the demo world through the pipeline the first time a data directory
// is used, and waits until it is committed so the demo's events find their world.
func loadDemoWorldOnce(ctx context.Context, st *stack.Stack) error {
	marker := filepath.Join(st.DataDir, "demo-world.loaded")
	if _, err := os.Stat(marker); err == nil {
		return nil
	}
	w, err := worldfile.DemoWorld()
	if err != nil {
		return err
	}
	_, js, err := st.ConnectAs(natsauth.Operator) // as `worldgate world load` would
	if err != nil {
		return err
	}
	n, err := publishWorld(ctx, js, w)
	if err != nil {
		return err
	}
	st.Log.Info("demo world sent through the pipeline", "proposals", n)
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := st.WaitIdle(wctx); err != nil {
		return fmt.Errorf("loading the demo world: %w", err)
	}
	// The lore index reloads every few seconds; the demo should not start before it has the
	// world's lore.
	if err := st.Lore.Refresh(wctx); err != nil {
		return fmt.Errorf("indexing the demo world's lore: %w", err)
	}
	return os.WriteFile(marker, []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o644)
}

// publishWorld turns a world into proposals and publishes each on the emitter subject of the
// connection's user (world-loader, else operator), with its deterministic proposal id as
// message id.
func publishWorld(ctx context.Context, js jetstream.JetStream, w *worldfile.World) (int, error) {
	emitter := events.EmitterOperator
	if nc := js.Conn(); nc != nil && nc.Opts.User == natsauth.WorldLoader {
		emitter = events.EmitterWorldLoader
	}
	subject := events.EmitSubject(emitter)
	routes := route.Default()
	proposals, err := worldfile.Proposals(w, routes.For)
	if err != nil {
		return 0, err
	}
	for i := range proposals {
		p := &proposals[i]
		data, err := json.Marshal(p)
		if err != nil {
			return i, err
		}
		msg := runtime.NewMessage(subject, p.ProposalID+"@submit", data)
		msg.Metadata.Set(events.HeaderCorrelationID, p.CorrelationID)
		msg.Metadata.Set(events.HeaderType, p.Kind)
		_, span := tracing.StartPublish(ctx, subject, p.CorrelationID, tracing.MetadataCarrier(msg.Metadata))
		err = runtime.NewPublisher(js, 0).PublishContext(ctx, "", msg)
		tracing.EndSpan(span, err)
		if err != nil {
			return i, err
		}
	}
	return len(proposals), nil
}

// waitWorld waits until every proposal of w is committed or refused (`world load -wait`),
// reading the world's journey as `worldgate trace world:<name>` does (from a day back, so a
// second load of the same file, whose proposals JetStream drops as duplicates, finds the first
// load's). A refused proposal is an error naming its gate and reason.
func waitWorld(ctx context.Context, js jetstream.JetStream, w *worldfile.World, within time.Duration, stdout io.Writer) error {
	proposals, err := worldfile.Proposals(w, route.Default().For)
	if err != nil {
		return err
	}
	want := map[string]bool{}
	for _, p := range proposals {
		want[p.ProposalID] = true
	}
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	since := time.Now().Add(-24 * time.Hour)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		committed, pending := 0, len(want)
		var refused []string
		j, err := findJourney(ctx, js, worldfile.CorrelationID(w.Name), since)
		if err != nil && ctx.Err() == nil {
			return fmt.Errorf("read the world's journey: %w", err)
		}
		if j != nil {
			for _, tp := range j.Proposals {
				if !want[tp.ProposalID] {
					continue
				}
				switch tp.Final {
				case "committed":
					committed++
					pending--
				case "rejected":
					why := "refused"
					if n := len(tp.Rejections); n > 0 {
						r := tp.Rejections[n-1]
						why = fmt.Sprintf("refused by the %s gate (%s): %s", r.Gate, r.Code, r.Reason)
					}
					refused = append(refused, tp.ProposalID+": "+why)
					pending--
				}
			}
		}
		if pending == 0 {
			fmt.Fprintf(stdout, "committed %d of %d proposals of world %s\n", committed, len(want), w.Name)
			if len(refused) > 0 {
				return fmt.Errorf("%d proposals were refused:\n  %s", len(refused), strings.Join(refused, "\n  "))
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("after %s, %d of %d proposals of world %s are still undecided (committed %d, refused %d): is every worker running? `worldgate trace %s` shows where each is",
				within, pending, len(want), w.Name, committed, len(refused), worldfile.CorrelationID(w.Name))
		case <-tick.C:
		}
	}
}

// devBudgets is worldgate dev's embedded budget file (docs/budgets.md).
//
//go:embed demo/budgets.yaml
var devBudgets []byte
