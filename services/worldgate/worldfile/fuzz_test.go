package worldfile

import "testing"

// FuzzParse: no input makes Parse panic, and whatever it accepts becomes valid proposals.
func FuzzParse(f *testing.F) {
	f.Add(Demo())
	f.Add([]byte("locations:\n  - {id: loc:a, name: A, description: d}\n"))
	f.Add([]byte("npcs: [{id: npc:x}]\n"))
	f.Add([]byte("{"))
	f.Fuzz(func(t *testing.T, data []byte) {
		w, err := Parse("fuzz.yaml", data)
		if err != nil {
			return
		}
		if _, err := Proposals(w, route); err != nil {
			t.Fatalf("accepted world yields no proposals: %v", err)
		}
	})
}
