package agent

import (
	"errors"
	"testing"

	"github.com/worldgate/worldgate/shared/mcpx"
)

// A tool's answer about a location refuses the move; a world server that cannot reach the
// graph must not (the trigger is redelivered instead, or an outage would drop moves).
func TestOnlyToolAnswersRefuseAMove(t *testing.T) {
	for _, c := range []struct {
		err    error
		refuse bool
	}{
		{mcpx.NotFound("no location with id %q", "loc:nowhere"), true},
		{mcpx.InvalidInput("locationId must start with loc:"), true},
		{errors.New("graph unavailable: dial tcp 127.0.0.1:8182: connect: connection refused"), false},
		{errors.New("read loc:hall: context deadline exceeded"), false},
	} {
		if got := isAnswer(c.err.Error()); got != c.refuse {
			t.Errorf("%q: refuse = %v, want %v", c.err, got, c.refuse)
		}
	}
}
