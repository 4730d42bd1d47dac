package edge

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/natsx"
)

// JourneyResponse is GET /v1/events/{id}/journey's answer: every attempt made for the event —
// the ones the gates refused (reprompts, a refused fallback) and the one its outcome decided —
// and what the whole request spent. An outcome's own journey is its final attempt's only.
type JourneyResponse struct {
	EventID       string           `json:"eventId"`
	CorrelationID string           `json:"correlationId"`
	Attempts      []JourneyAttempt `json:"attempts"`
	// Tokens and CostUSD are the sums over Attempts: what the request cost.
	Tokens  events.Tokens `json:"tokens"`
	CostUSD float64       `json:"costUsd"`
}

// JourneyAttempt is one proposal made for the event: its gate decisions, its refusals, and
// what it spent. Result is "refused" (a gate refused it for good), "pending", or the kind of
// the outcome it decided.
type JourneyAttempt struct {
	ProposalID   string           `json:"proposalId"`
	AgentRole    string           `json:"agentRole,omitempty"`
	ProposalKind string           `json:"proposalKind,omitempty"`
	Attempt      int              `json:"attempt"`
	Fallback     bool             `json:"fallback,omitempty"`
	Result       string           `json:"result"`
	Gates        []JourneyHop     `json:"gates"`
	Refusals     []JourneyRefusal `json:"refusals,omitempty"`
	Provider     string           `json:"provider,omitempty"`
	Model        string           `json:"model,omitempty"`
	Tokens       events.Tokens    `json:"tokens"`
	CostUSD      float64          `json:"costUsd"`
}

// JourneyHop is one gate decision (the routing slip's hop without its attestation).
type JourneyHop struct {
	Gate       string  `json:"gate"`
	Outcome    string  `json:"outcome"`
	Code       string  `json:"code,omitempty"`
	DurationMs float64 `json:"durationMs"`
}

// JourneyRefusal is a gate's refusal of the attempt, as the gate published it.
type JourneyRefusal struct {
	Gate      string `json:"gate"`
	Code      string `json:"code"`
	Reason    string `json:"reason"`
	Transient bool   `json:"transient,omitempty"`
}

// journeyWindow bounds the scan: an event's attempts are refused within this long of it.
const journeyWindow = 15 * time.Minute

// journey answers GET /v1/events/{id}/journey for an event the key may read (404 otherwise):
// the refusals are read from stream PROPOSALS (proposals.rejected.>, which carry the refused
// proposal), the deciding attempts from the event's outcomes, both from the event's time on.
func (s *Server) journey(w http.ResponseWriter, r *http.Request, k *key) {
	id := r.PathValue("id")
	u, errs := eventIDParam(id)
	opts, ferrs := watchOptions(r, k, []string{"actor"})
	if errs = append(errs, ferrs...); len(errs) > 0 {
		writeProblem(w, status(errs), "invalid_request", "invalid journey request", errs...)
		return
	}
	ctx, cancel := s.deadline(r.Context(), 10*time.Second)
	defer cancel()
	e, err := events.FindEvent(ctx, s.cfg.JetStream, id)
	if errors.Is(err, events.ErrUnknownEvent) || err == nil && len(opts.Actors) > 0 && !slices.Contains(opts.Actors, e.Actor.ID) {
		writeUnknown(w, id)
		return
	}
	if err != nil {
		writeProblem(w, http.StatusServiceUnavailable, "unavailable", "the event cannot be looked up now; retry", fieldError{Field: "", Message: err.Error()})
		return
	}
	sec, nsec := u.Time().UnixTime()
	from := time.Unix(sec, nsec).Add(-2 * time.Second)
	j, err := s.readJourney(ctx, e, from)
	if err != nil {
		writeProblem(w, http.StatusServiceUnavailable, "unavailable", "the journey cannot be read now; retry", fieldError{Field: "", Message: err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, j)
}

// readJourney gathers e's attempts from its refusals and its outcomes stored since from.
func (s *Server) readJourney(ctx context.Context, e *events.StoredEvent, from time.Time) (*JourneyResponse, error) {
	j := &JourneyResponse{EventID: e.EventID, CorrelationID: e.CorrelationID, Attempts: []JourneyAttempt{}}
	byID := map[string]int{}
	attempt := func(id, role, kind string, n int) *JourneyAttempt {
		i, ok := byID[id]
		if !ok {
			i = len(j.Attempts)
			byID[id] = i
			j.Attempts = append(j.Attempts, JourneyAttempt{ProposalID: id, AgentRole: role, ProposalKind: kind, Attempt: n, Result: "pending", Gates: []JourneyHop{}})
		}
		return &j.Attempts[i]
	}
	until := from.Add(journeyWindow)
	err := scanRange(ctx, s.cfg.JetStream, events.StreamProposals, events.SubjectRejectedAll, from, until, func(data []byte) {
		var rej events.Rejection
		if json.Unmarshal(data, &rej) != nil || rej.CorrelationID != e.CorrelationID || rej.Proposal != nil && rej.Proposal.CausationID != e.EventID {
			return
		}
		a := attempt(rej.ProposalID, rej.AgentRole, rej.Kind, rej.Attempt)
		a.Refusals = append(a.Refusals, JourneyRefusal{Gate: rej.Gate, Code: string(rej.Code), Reason: rej.Reason, Transient: rej.Transient})
		if !rej.Transient {
			a.Result = "refused"
		}
		if p := rej.Proposal; p != nil {
			a.Gates = hops(p.Route.Trail)
			if pv := p.Provenance; pv != nil {
				a.Provider, a.Model, a.Tokens, a.CostUSD, a.Fallback = pv.Provider, pv.Model, pv.Tokens, pv.CostUSD, pv.Fallback != ""
			}
		}
	})
	if err != nil {
		return nil, err
	}
	err = scanRange(ctx, s.cfg.JetStream, events.StreamOutcomes, events.OutcomeActorFilter(e.Actor.ID), from, until, func(data []byte) {
		o, err := events.DecodeOutcome(data)
		if err != nil || o.EventID != e.EventID || o.ProposalID == "" {
			return
		}
		a := attempt(o.ProposalID, o.AgentRole, o.ProposalKind, 0)
		a.Result = string(o.Kind)
		a.Fallback = a.Fallback || o.Kind == events.OutcomeFallback
		if oj := o.Journey; oj != nil {
			a.Attempt, a.Gates = oj.Attempt, hops(oj.Gates)
			a.Provider, a.Model, a.Tokens, a.CostUSD = oj.Provider, oj.Model, oj.Tokens, oj.CostUSD
		}
	})
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(j.Attempts, func(a, b JourneyAttempt) int {
		return cmp.Or(cmp.Compare(a.AgentRole, b.AgentRole), cmp.Compare(a.Attempt, b.Attempt))
	})
	for _, a := range j.Attempts {
		j.Tokens.Prompt += a.Tokens.Prompt
		j.Tokens.Completion += a.Tokens.Completion
		j.Tokens.Cached += a.Tokens.Cached
		j.CostUSD += a.CostUSD
	}
	return j, nil
}

// hops is trail without its attestations.
func hops(trail []events.Hop) []JourneyHop {
	out := make([]JourneyHop, 0, len(trail))
	for _, h := range trail {
		out = append(out, JourneyHop{Gate: h.Gate, Outcome: h.Outcome, Code: h.Code, DurationMs: h.DurationMs})
	}
	return out
}

// scanRange hands fn the body of each message of stream on subject stored from from, up to
// until or the stream's last message when the scan began.
func scanRange(ctx context.Context, js jetstream.JetStream, stream, subject string, from, until time.Time, fn func([]byte)) error {
	st, err := js.Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stream %s: %w", stream, err)
	}
	info := st.CachedInfo()
	if info.State.Msgs == 0 || info.State.LastTime.Before(from) {
		return nil
	}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}, DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &from}
	_, err = natsx.Scan(ctx, st, cfg, info.State.LastSeq, func(m jetstream.Msg, meta *jetstream.MsgMetadata) bool {
		if meta.Timestamp.After(until) {
			return true
		}
		fn(m.Data())
		return false
	})
	if err != nil {
		return fmt.Errorf("read %s: %w", stream, err)
	}
	return nil
}
