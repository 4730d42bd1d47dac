package agent

import (
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/mcpx/client"
)

// Defaults of ContextReuse.
const (
	DefaultReuseTTL  = 30 * time.Second
	DefaultReuseSize = 2048
)

// ContextReuse keeps the MCP answers a trigger's generation was given, for its reprompts.
//
// A gate that refuses the content itself — its shape (schema), its words (safety), its likeness
// to a recent line (dedup) — says nothing of the world the model read. The reprompt asks the
// model again, the model asks for the same context, and those calls are answered with what the
// refused attempt was told instead of asking the MCP servers again: the servers' work and the
// round trips are spared, and the reprompt's provenance records the same calls and results, so
// the replay gate recomputes its context hash as before. A refusal that may be about the world
// (the invariant gate, replay, approval, the event-processor's conflicts) asks again.
//
// Answers are kept per role, trigger, tool and arguments, for at most TTL, and only by the
// replica that fetched them: a reprompt handled by another replica asks the servers.
type ContextReuse struct {
	answers *expirable.LRU[string, *client.Result]
}

// NewContextReuse keeps at most size answers (DefaultReuseSize if size ≤ 0), each for ttl
// (DefaultReuseTTL if ttl ≤ 0).
func NewContextReuse(size int, ttl time.Duration) *ContextReuse {
	if size <= 0 {
		size = DefaultReuseSize
	}
	if ttl <= 0 {
		ttl = DefaultReuseTTL
	}
	return &ContextReuse{answers: expirable.NewLRU[string, *client.Result](size, nil, ttl)}
}

// reusable reports whether a reprompt after rej may be answered from the refused attempt's
// context: the refusal is about the content, not the world.
func reusable(rej *events.Rejection) bool {
	if rej == nil {
		return false
	}
	switch rej.Code {
	case events.CodeSchemaInvalid, events.CodeSafetyFlagged, events.CodeDuplicate:
		return true
	}
	return false
}

func reuseKey(t *task, tool, argsHash string) string {
	return t.role.Name + "\x00" + t.env.EventID + "\x00" + tool + "\x00" + argsHash
}

func (c *ContextReuse) get(t *task, tool, argsHash string) (*client.Result, bool) {
	if c == nil || !t.reuse {
		return nil, false
	}
	return c.answers.Get(reuseKey(t, tool, argsHash))
}

func (c *ContextReuse) put(t *task, tool, argsHash string, res *client.Result) {
	if c != nil && res != nil {
		c.answers.Add(reuseKey(t, tool, argsHash), res)
	}
}
