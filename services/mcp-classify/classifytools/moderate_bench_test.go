package classifytools

import (
	"context"
	"testing"
)

// lines are what moderation mostly sees: NPC lines and player words with nothing to flag.
var benchLines = []string{
	"Welcome to the Gilded Tankard, traveller. The ale is cold and the fire is warm; sit wherever you like.",
	"Apples are two coppers apiece, or five for a silver if you take a basket.",
	"The north gate closes at dusk. Mind the fog on the moor road, it rolls in fast after rain.",
	"I heard the miller's daughter found an old key in the well. Nobody knows what it opens.",
}

// BenchmarkModerate is one moderation of a clean line (the common case) with the default policy.
func BenchmarkModerate(b *testing.B) {
	p, err := DefaultPolicy()
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := p.Moderate(ctx, benchLines[i%len(benchLines)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
