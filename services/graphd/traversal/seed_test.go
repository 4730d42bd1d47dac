package traversal

import "testing"

// TestJavaRandom checks the java.util.Random sequence SeedStrategy's steps
// draw from against values Java gives (new Random(0).nextInt(),
// nextDouble(); new Random(42).nextInt()).
func TestJavaRandom(t *testing.T) {
	if got := newJavaRandom(0).next(32); got != -1155484576 {
		t.Errorf("new Random(0).nextInt() = %d", got)
	}
	if got := newJavaRandom(0).nextDouble(); got != 0.730967787376657 {
		t.Errorf("new Random(0).nextDouble() = %v", got)
	}
	if got := newJavaRandom(42).next(32); got != -1170105035 {
		t.Errorf("new Random(42).nextInt() = %d", got)
	}
	r := newJavaRandom(7)
	for i := 0; i < 1000; i++ {
		if n := r.nextInt(6); n < 0 || n >= 6 {
			t.Fatalf("nextInt(6) = %d", n)
		}
		if n := r.nextInt(8); n < 0 || n >= 8 {
			t.Fatalf("nextInt(8) = %d", n)
		}
	}
	if h, _ := javaHashCode("ab"); h != 3105 {
		t.Errorf(`"ab".hashCode() = %d`, h)
	}
	if h, _ := javaHashCode(int64(1) << 32); h != 1 {
		t.Errorf("Long(1<<32).hashCode() = %d", h)
	}
}
