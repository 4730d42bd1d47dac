// Package aiworker wires the ai-worker's agent roles to the worker runtime: one durable
// consumer per role on its trigger subject in stream WORLD (ai-<role>), and one on
// proposals.rejected.> (ai-rejections) that follows refusals of this worker's proposals.
// Proposals are returned to the runtime, which publishes them with their deterministic message
// id and acknowledges the input only after JetStream has acknowledged the proposal.
//
// worldgate dev and the ai-worker binary both call Register.
package aiworker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/events/fallback"
	"github.com/worldgate/worldgate/events/route"
	"github.com/worldgate/worldgate/services/ai-worker/agent"
	"github.com/worldgate/worldgate/services/ai-worker/roles"
	"github.com/worldgate/worldgate/shared/attest"
	"github.com/worldgate/worldgate/shared/llm"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/runtime"
)

// Durable consumer of rejections.
const RejectionsDurable = "ai-rejections"

// Deps are what the ai-worker's handlers need.
type Deps struct {
	// LLM is the provider layer (llmsetup builds it); required when an LLM role runs.
	LLM llm.Provider
	// Tools is the MCP client (*client.Client) with the world, lore and classify servers.
	Tools agent.ToolSource
	// KV is the AI cache bucket (natsx.BucketAICache).
	KV jetstream.KeyValue
	// Committed, when set, is the JetStream on which the committed exit changes
	// (ExitChangeSubjects) are followed, which lets world-rules cache list-exits answers per
	// location (agent.ExitsCache); nil: every move asks mcp-world.
	Committed jetstream.JetStream
	// ExitsTTL bounds how long a cached list-exits answer is used (default
	// agent.DefaultExitsTTL; negative: no cache).
	ExitsTTL time.Duration
	// Routes per proposal kind (default route.Default()).
	Routes agent.Routes
	// Keyring holds the gates' public keys (attest.LoadKeyring of the -attest-keys directory):
	// a rejection is followed only when it verifies as a refusal by a gate of the route of a
	// proposal this worker sent (agent.Config.Keyring). Required.
	Keyring *attest.Keyring
	// Registerer receives the agent metrics; Logger the logs. Both required.
	Registerer prometheus.Registerer
	Logger     *slog.Logger
	// Roles to run (default: all).
	Roles []string
	// ToolBudget per task (default 6); AmbienceFreshFor (default 10m; negative: never skip).
	ToolBudget       int
	AmbienceFreshFor time.Duration
	// OnInputFlag, when set, is told of each player whose words the input rail flagged (a
	// blocked category or prompt injection): the budget's repeat-offender counter
	// (budget.Offenders.OnFlag).
	OnInputFlag func(ctx context.Context, playerID string, categories []string)
	// ShortCircuit bounds the reuse short-circuit (agent.ShortCircuit): a target whose requests
	// keep ending in reuse is answered with the accepted content, without a model call, for a
	// cooldown. The zero value is the defaults (2 reuses in a row, 10-minute window, 5-minute
	// cooldown); After < 0 turns it off.
	ShortCircuit agent.ShortCircuitConfig
	// Fallback table (default fallback.Default()).
	Fallback *fallback.Table
	// MaxInlineWait: a transient retry due within this is waited for in the handler; a later
	// one is handed back to JetStream for a delayed redelivery (default 20s).
	MaxInlineWait time.Duration
	// AckWait of the consumers: how soon a crashed worker's triggers are redelivered (default
	// 10s). A live worker keeps the triggers it works on in progress, up to MaxTask.
	AckWait time.Duration
	// MaxTask is how long one task may take, model retries included, before its trigger is left
	// for redelivery (default 3 minutes).
	MaxTask time.Duration
	// RejectionBackoff are the redelivery delays of the rejection consumer while a transient
	// retry is not yet due (default 1s, 2s, 5s, 10s, 30s).
	RejectionBackoff []time.Duration
	// MaxClockSkew: a world event that occurred further in the future than this is refused
	// (dead-lettered with the reason). Default 5m.
	MaxClockSkew time.Duration
	// MaxEventAge: a world event older than this is refused. Default 24h; negative: no limit.
	MaxEventAge time.Duration
	// Now is the clock of those checks (default time.Now).
	Now func() time.Time
}

// Register adds the ai-worker's handlers to app.
func Register(app *runtime.App, d Deps) error {
	if app == nil {
		return errors.New("aiworker: a runtime app is required")
	}
	w, err := New(d)
	if err != nil {
		return err
	}
	w.register(app)
	if h, ok := d.LLM.(interface{ Health() []llm.TargetHealth }); ok {
		// Each target's circuit, for worldgate status.
		app.AddStats("llm", func() any { return h.Health() })
	}
	return nil
}

// Worker holds the agent and the roles it runs.
type Worker struct {
	agent *agent.Agent
	roles []roles.Role
	d     Deps
}

// New builds the worker without registering it (for benchmarks and tests that drive it directly).
func New(d Deps) (*Worker, error) {
	switch {
	case d.Tools == nil:
		return nil, errors.New("aiworker: an MCP client is required")
	case d.KV == nil:
		return nil, errors.New("aiworker: the AI cache bucket is required")
	case d.Registerer == nil || d.Logger == nil:
		return nil, errors.New("aiworker: a metrics registerer and a logger are required")
	case d.Keyring == nil:
		return nil, errors.New("aiworker: the gates' public keys are required (-attest-keys): a rejection is followed only when the gates' signatures show it refuses a proposal this worker sent")
	}
	rs, err := roles.Select(d.Roles)
	if err != nil {
		return nil, err
	}
	cfg := agent.Config{Tools: d.Tools, Cache: agent.KVCache{KV: d.KV}, Routes: d.Routes, Metrics: agent.NewMetrics(d.Registerer),
		Logger: d.Logger, Fallback: d.Fallback, ToolBudget: d.ToolBudget, AmbienceFreshFor: d.AmbienceFreshFor,
		Reuse: agent.NewContextReuse(0, 0), ShortCircuit: agent.NewShortCircuit(d.ShortCircuit), Keyring: d.Keyring}
	cfg.Rail.OnFlag = d.OnInputFlag
	if d.Committed != nil && d.ExitsTTL >= 0 && slices.ContainsFunc(rs, func(r roles.Role) bool { return !r.UsesLLM }) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cfg.Exits, err = watchExits(ctx, d.Committed, d.ExitsTTL, d.Logger)
		cancel()
		if err != nil {
			return nil, err
		}
	}
	if cfg.Routes == nil {
		cfg.Routes = route.Default()
	}
	cfg.LLM = d.LLM
	for _, r := range rs {
		if r.UsesLLM && cfg.LLM == nil {
			return nil, fmt.Errorf("aiworker: role %s needs an LLM provider", r.Name)
		}
	}
	a, err := agent.New(cfg)
	if err != nil {
		return nil, err
	}
	if d.MaxInlineWait <= 0 {
		d.MaxInlineWait = 20 * time.Second
	}
	if d.MaxTask <= 0 {
		d.MaxTask = 3 * time.Minute
	}
	if d.MaxClockSkew <= 0 {
		d.MaxClockSkew = 5 * time.Minute
	}
	if d.MaxEventAge == 0 {
		d.MaxEventAge = 24 * time.Hour
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if len(d.RejectionBackoff) == 0 {
		d.RejectionBackoff = []time.Duration{time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second}
	}
	return &Worker{agent: a, roles: rs, d: d}, nil
}

// Agent returns the worker's agent.
func (w *Worker) Agent() *agent.Agent { return w.agent }

func (w *Worker) register(app *runtime.App) {
	for _, r := range w.roles {
		c := runtime.Consumer{Stream: events.StreamWorld, Durable: r.Durable(),
			Subjects: []string{r.Subject()}, AckWait: w.d.AckWait, MaxHold: w.d.MaxTask}
		if r.Name == roles.WorldRules {
			// A player's moves are proposed in the order the game sent them, across a crash too:
			// the second must not reach the gates before the first, which a dead worker held.
			c.OrderKey = events.ActorKey
		}
		app.Handle(r.Durable(), c, w.triggerHandler(r))
	}
	app.Handle(RejectionsDurable, runtime.Consumer{Stream: events.StreamProposals, Durable: RejectionsDurable,
		Subjects: []string{events.SubjectRejectedAll}, AckWait: w.d.AckWait, MaxHold: w.d.MaxTask, MaxDeliver: 12, Backoff: w.d.RejectionBackoff},
		w.rejectionHandler())
}

// Trigger runs one trigger message through the role's task (what the handler does).
func (w *Worker) Trigger(ctx context.Context, role roles.Role, data []byte) (*agent.Result, error) {
	env, err := events.DecodeEnvelope(data)
	if err != nil {
		return nil, runtime.Permanent(fmt.Errorf("the %s trigger is not a valid envelope: %w", role.Trigger, err))
	}
	return w.agent.Handle(ctx, role, env)
}

func (w *Worker) triggerHandler(r roles.Role) message.HandlerFunc {
	return func(m *message.Message) ([]*message.Message, error) {
		env, err := events.DecodeEnvelope(m.Payload)
		if err != nil {
			return nil, w.refuseEvent(m, r, fmt.Errorf("the %s trigger is not a valid envelope: %w", r.Trigger, err))
		}
		// JetStream de-duplicates on Nats-Msg-Id: one that is not the envelope's idempotency
		// key would let a publisher have the same event processed twice.
		if m.UUID != env.IdempotencyKey {
			return nil, w.refuseEvent(m, r, fmt.Errorf("the %s event %s was published with Nats-Msg-Id %q, not its idempotencyKey %q: publish with Nats-Msg-Id set to the idempotency key (events.Publish does)",
				env.Type, env.EventID, m.UUID, env.IdempotencyKey))
		}
		if err := w.checkTime(env); err != nil {
			return nil, w.refuseEvent(m, r, err)
		}
		// The role reads the payload of its trigger type: an event of another type on this
		// role's subject would fail on every delivery and be dead-lettered unanswered.
		if env.Type != r.Trigger {
			return nil, w.refuseEvent(m, r, fmt.Errorf("the %s event %s was published on %s, the subject of %s events: publish each event on its own type's subject (events.Publish does)",
				env.Type, env.EventID, m.Metadata.Get(runtime.MetaSubject), r.Trigger))
		}
		res, err := w.agent.Handle(m.Context(), r, env)
		if err != nil {
			return nil, w.giveUp(m, r, env, err)
		}
		return toMessages(res)
	}
}

// giveUp is err as the trigger handler returns it: on the last delivery (or when err is
// permanent) the trigger is dead-lettered, and whoever awaits the event gets a refused Outcome
// (code GAVE_UP, transient: publishing it again later may succeed) instead of silence.
func (w *Worker) giveUp(m *message.Message, r roles.Role, env *events.Envelope, err error) error {
	limit, _ := strconv.Atoi(m.Metadata.Get(runtime.MetaMaxDeliver))
	n := runtime.Deliveries(m)
	if !runtime.IsPermanent(err) && (limit <= 0 || n < limit) {
		return err
	}
	o := events.RequestRefused(env, r.Name, "", events.CodeGaveUp,
		fmt.Sprintf("Worldgate's %s role could not act on this %s event after %d attempts, so nothing was done; publish it again later (operators find why in deadletter.%s).",
			r.Name, env.Type, n, r.Durable()), w.d.Now())
	o.Refusal.Transient = true
	om, oerr := runtime.OutcomeMessage(o)
	if oerr != nil {
		return err
	}
	return runtime.PermanentWith(err, om)
}

// refuseEvent dead-letters a trigger that role r will not act on, and publishes first the
// refused Outcome (events.EventRefused, code EVENT_REFUSED, the same reason) that whoever
// awaits the event receives instead of silence.
func (w *Worker) refuseEvent(m *message.Message, r roles.Role, why error) error {
	o := events.EventRefused(m.Payload, r.Name, why.Error(), w.d.Now())
	if o == nil {
		return runtime.Permanent(why)
	}
	om, err := runtime.OutcomeMessage(o)
	if err != nil {
		return runtime.Permanent(why)
	}
	return runtime.PermanentWith(why, om)
}

// checkTime refuses an event that occurred outside the accepted window around now.
func (w *Worker) checkTime(env *events.Envelope) error {
	now := w.d.Now()
	switch {
	case env.OccurredUTC.After(now.Add(w.d.MaxClockSkew)):
		return fmt.Errorf("the %s event %s occurred at %s, more than %s in the future: check the publisher's clock",
			env.Type, env.EventID, env.OccurredUTC.UTC().Format(time.RFC3339), w.d.MaxClockSkew)
	case w.d.MaxEventAge > 0 && env.OccurredUTC.Before(now.Add(-w.d.MaxEventAge)):
		return fmt.Errorf("the %s event %s occurred at %s, more than %s ago: too old to act on",
			env.Type, env.EventID, env.OccurredUTC.UTC().Format(time.RFC3339), w.d.MaxEventAge)
	}
	return nil
}

func (w *Worker) rejectionHandler() message.HandlerFunc {
	return func(m *message.Message) ([]*message.Message, error) {
		var rej events.Rejection
		if err := events.CheckJSON("rejection", m.Payload); err != nil {
			return nil, runtime.Permanentf("not a rejection: %v", err)
		}
		if err := json.Unmarshal(m.Payload, &rej); err != nil {
			return nil, runtime.Permanentf("not a rejection: %v", err)
		}
		ctx := m.Context()
		// The subject names the gate: only that gate's NATS user may publish there.
		res, err := w.agent.Rejected(ctx, m.Metadata.Get(runtime.MetaSubject), &rej, w.roles)
		if err != nil {
			return nil, err
		}
		if res.Note == agent.NoteNotMine {
			if role := rejectedRole(&rej); role != "" && w.elsewhere(role) {
				// Workers started with -roles share this consumer: hand the rejection back
				// for a worker that runs the role (JetStream redelivers it after the
				// consumer's backoff; past MaxDeliver it is dead-lettered with this reason).
				return nil, fmt.Errorf("rejection of %s's proposal %s: this worker runs %s, not %s; handed back for a worker that runs it",
					role, rej.ProposalID, w.roleNames(), role)
			}
		}
		if wait := time.Until(res.NotBefore); res.Proposal != nil && wait > 0 {
			if wait > w.d.MaxInlineWait {
				// JetStream redelivers it after the consumer's backoff; it is due by then or
				// waits again.
				return nil, fmt.Errorf("transient retry of %s is due in %s", res.Proposal.ProposalID, wait.Round(time.Millisecond))
			}
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			case <-t.C:
			}
			logx.From(ctx, w.d.Logger).Debug("transient retry due", "proposalId", res.Proposal.ProposalID)
		}
		return toMessages(res)
	}
}

// rejectedRole is the agent role whose proposal rej refuses.
func rejectedRole(rej *events.Rejection) string {
	if rej.Proposal != nil {
		return rej.Proposal.AgentRole
	}
	return rej.AgentRole
}

// elsewhere reports whether role is one another worker may run: a known role this worker
// (started with -roles) does not.
func (w *Worker) elsewhere(role string) bool {
	if _, known := roles.Lookup(role); !known {
		return false
	}
	return !slices.ContainsFunc(w.roles, func(r roles.Role) bool { return r.Name == role })
}

func (w *Worker) roleNames() string {
	names := make([]string, len(w.roles))
	for i, r := range w.roles {
		names[i] = r.Name
	}
	return strings.Join(names, ",")
}

func toMessages(res *agent.Result) ([]*message.Message, error) {
	if res == nil {
		return nil, nil
	}
	if res.Outcome != nil {
		m, err := runtime.OutcomeMessage(res.Outcome)
		if err != nil {
			return nil, runtime.Permanentf("the final outcome is invalid: %w", err)
		}
		return []*message.Message{m}, nil
	}
	if res.Proposal == nil {
		return nil, nil
	}
	p := res.Proposal
	raw, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	msg := runtime.NewMessage(res.Subject, res.MsgID, raw)
	msg.Metadata.Set(events.HeaderCorrelationID, p.CorrelationID)
	msg.Metadata.Set(events.HeaderCausationID, p.CausationID)
	msg.Metadata.Set(events.HeaderType, p.Kind)
	if res.Downgrade != "" {
		msg.Metadata.Set(events.HeaderAIDowngrade, res.Downgrade)
	}
	return []*message.Message{msg}, nil
}
