package textnorm_test

import (
	"testing"

	"github.com/worldgate/worldgate/shared/textnorm"
)

func BenchmarkFold(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		textnorm.Fold("Welcome to the Gilded Tankard, traveller. The ale is cold and the fire is warm; sit wherever you like.")
	}
}
