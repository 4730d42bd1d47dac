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

// BenchmarkModerate is one moderation of a clean line (the common case) with the default policy,
// beside policy 2.0.0 (the rules before the normaliser and the other languages) in the same run:
// go test -run '^$' -bench BenchmarkModerate -benchtime 20000x -count 5 ./mcp-classify/classifytools
func BenchmarkModerate(b *testing.B) {
	for _, version := range []string{"", "worldgate-moderation-2.0.0"} {
		p, err := EmbeddedPolicy(version)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(p.Version(), func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := p.Moderate(ctx, benchLines[i%len(benchLines)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
