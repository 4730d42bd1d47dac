package edge_test

import (
	"iter"

	sse "github.com/tmaxmax/go-sse"
)

func iterPull(seq func(func(sse.Event, error) bool)) (func() (sse.Event, error, bool), func()) {
	return iter.Pull2(iter.Seq2[sse.Event, error](seq))
}
