package events

import (
	"slices"
	"testing"
)

// The world loader and operators may propose exactly the kinds whose KindInfo says
// WorldBuilding: a new world-building kind is one KindInfo line, not an emitters.go edit too.
func TestWorldBuildingEmittersProposeTheWorldBuildingKinds(t *testing.T) {
	var want []string
	for _, k := range Kinds() {
		if k.WorldBuilding {
			want = append(want, k.Kind)
		}
	}
	if len(want) == 0 {
		t.Fatal("no world-building kinds")
	}
	for _, e := range []string{EmitterWorldLoader, EmitterOperator} {
		if got := EmitterKinds(e); !slices.Equal(got, want) {
			t.Errorf("%s may propose %v, want the world-building kinds %v", e, got, want)
		}
	}
	if EmitterMay(EmitterOperator, KindAmbience) {
		t.Error("the operator may propose generated ambience")
	}
}
