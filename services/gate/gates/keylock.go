package gates

import (
	"hash/fnv"
	"sync"
)

// keyLocks serialises the compare-and-set loops of one process on the same KV key. Without
// it, concurrent handlers of one replica mostly conflict with each other on a hot key (a
// location's fingerprints, a global rate window) and each conflict costs a round trip;
// replicas still coordinate through compare-and-set alone.
type keyLocks [64]sync.Mutex

func (l *keyLocks) lock(key string) (unlock func()) {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	m := &l[h.Sum32()%uint32(len(l))]
	m.Lock()
	return m.Unlock
}
