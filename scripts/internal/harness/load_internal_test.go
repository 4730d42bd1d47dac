package harness

import "testing"

// A move is stale when any earlier move of its player is undecided when it is generated, not only
// the one just before it: a move committed late, after the player's next move was refused,
// leaves the game's view of the player behind (chaos seed 39: move 1727 committed 14 s late,
// 2127 was refused meanwhile, and 2527 started where 1727 had taken the player from).
func TestStaleCountsEveryEarlierUndecidedMove(t *testing.T) {
	decided := map[string]bool{}
	g := &Generator{Undecided: func(corr string) bool { return !decided[corr] }}
	move := func(corr string) bool {
		g.noteMove("player:p", corr)
		return g.Stale(corr)
	}
	if move("a") {
		t.Error("the first move is stale")
	}
	if !move("b") {
		t.Error("b, generated while a was undecided, is not stale")
	}
	decided["b"] = true // refused while a is still on its way
	if !move("c") {
		t.Error("c, generated while a was undecided (b decided), is not stale")
	}
	if g.Previous("c") != "b" {
		t.Errorf("the move before c is %q, want b", g.Previous("c"))
	}
	decided["a"], decided["c"] = true, true
	if move("d") {
		t.Error("d, generated with every earlier move decided, is stale")
	}
	if move("d") {
		t.Error("d again (a publish retry) is stale")
	}
	if n := len(g.pending["player:p"]); n != 1 {
		t.Errorf("%d moves pending, want 1 (d)", n)
	}
}
