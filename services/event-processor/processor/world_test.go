package processor_test

import (
	"testing"
	"time"

	"github.com/worldgate/worldgate/services/worldgate/worldfile"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
)

// The demo world, loaded twice (the second time under new message ids, as a second
// `worldgate world load` would), commits once and leaves exactly the world of the file.
func TestDemoWorldLoadsOnceAndCompletely(t *testing.T) {
	e, gd, _ := startProcessor(t)
	w, err := worldfile.DemoWorld()
	if err != nil {
		t.Fatal(err)
	}
	for load := 0; load < 2; load++ {
		ps, err := worldfile.Proposals(w, func(string) ([]string, error) { return nil, nil })
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			publish(t, e.JS, &p, p.ProposalID+"-load"+string(rune('a'+load)))
		}
		natstest.WaitFor(t, 20*time.Second, "world loaded", func() bool { return committed(t, e) >= uint64(len(ps)) && settled(t, e) })
		if n := committed(t, e); n != uint64(len(ps)) {
			t.Fatalf("load %d: %d committed events for %d proposals", load+1, n, len(ps))
		}
	}
	exits := 0
	for _, l := range w.Locations {
		for _, x := range l.Exits {
			exits++
			if x.Back != "" {
				exits++
			}
		}
	}
	holds, itemsAt, about := 0, 0, 0
	for _, it := range w.Items {
		if it.Holder != "" {
			holds++
		} else if it.Location != "" {
			itemsAt++
		}
	}
	for _, l := range w.Lore {
		about += len(l.About)
	}
	members := 0
	for _, n := range w.NPCs {
		if n.Faction != "" {
			members++
		}
	}
	ps, _ := worldfile.Proposals(w, func(string) ([]string, error) { return nil, nil })
	wantV := map[string]int64{"Location": int64(len(w.Locations)), "Faction": int64(len(w.Factions)), "NPC": int64(len(w.NPCs)),
		"Player": int64(len(w.Players)), "Item": int64(len(w.Items)), "LoreFact": int64(len(w.Lore)), "AppliedEvent": int64(len(ps))}
	wantE := map[string]int64{"exit": int64(exits), "at": int64(len(w.NPCs) + len(w.Players) + itemsAt), "holds": int64(holds),
		"member_of": int64(members), "about": int64(about)}
	v, ed := counts(t, reader(t, gd.URL()))
	if !equalCounts(v, wantV) || !equalCounts(ed, wantE) {
		t.Fatalf("graph %v %v\nwant %v %v", v, ed, wantV, wantE)
	}
	if n := rejected(t, e); n != 0 {
		t.Fatalf("%d rejections", n)
	}
}
