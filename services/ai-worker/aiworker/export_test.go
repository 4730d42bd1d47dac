package aiworker

import (
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/worldgate/worldgate/services/ai-worker/roles"
)

// TriggerHandler is the handler the worker registers for role r (for tests that hand it a
// delivery of their own making).
func (w *Worker) TriggerHandler(r roles.Role) message.HandlerFunc { return w.triggerHandler(r) }
