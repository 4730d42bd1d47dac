package gates

import (
	"flag"
	"reflect"
	"testing"
	"time"
)

// The gates' settings an in-process caller sets (SetChain, as the stack and the process
// harness do) reach a gate process through its argv: the rate budgets, blocked categories and
// the reference wait it parses are the ones set.
func TestServiceConfigCarriesTheChainThroughItsArgv(t *testing.T) {
	if args := DefaultServiceConfig().Args(); len(args) != 0 {
		t.Errorf("the defaults render as %q, want nothing", args)
	}
	want := DefaultServiceConfig()
	chain := DefaultConfig()
	chain.Rate.Budgets = map[string]Budget{"*": {ActorCount: 1_000_000, ActorCostUSD: 1_000_000}, "chat": {ActorCount: 3}}
	chain.Safety.Blocked = map[string][]string{"*": {"hate"}}
	chain.Invariant.ReferenceWait = 15 * time.Second
	want.SetChain(chain)
	want.Gates, want.SigningKeys, want.Fuse = "schema,safety", "/keys", false

	var got ServiceConfig
	fs := flag.NewFlagSet("gate", flag.ContinueOnError)
	got.RegisterFlags(fs)
	if err := fs.Parse(want.Args()); err != nil {
		t.Fatal(err)
	}
	if err := got.Check(); err != nil {
		t.Fatal(err)
	}
	gotChain, err := got.chain()
	if err != nil {
		t.Fatal(err)
	}
	wantChain, _ := want.chain()
	if !wantChain.NoFusion || !reflect.DeepEqual(gotChain, wantChain) {
		t.Errorf("argv %q parses as\n%+v, want\n%+v (unfused)", want.Args(), gotChain, wantChain)
	}
}
