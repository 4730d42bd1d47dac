package proposetools

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/mcpx"
)

// status reads the calling client's outcomes from when id was made (ids are UUIDv7: their
// time is known) up to the end of the stream, and reports those that answer id.
func (s *Server) status(ctx context.Context, req *mcp.CallToolRequest, in StatusInput) (*mcp.CallToolResult, Status, error) {
	u, err := uuid.Parse(in.ID)
	if err != nil || u.Version() != 7 {
		return nil, Status{}, mcpx.InvalidInput("id %q is not a proposal or event id this server returned (a UUIDv7)", in.ID)
	}
	sec, nsec := u.Time().UnixTime()
	made := time.Unix(sec, nsec)
	if made.After(s.opts.Now().Add(time.Minute)) {
		return nil, Status{}, mcpx.InvalidInput("id %q was not returned by this server: it is dated in the future", in.ID)
	}
	outs, err := s.outcomes(ctx, callerOf(req).actor().ID, made.Add(-time.Minute), in.ID)
	if err != nil {
		return nil, Status{}, err
	}
	st := Status{ID: in.ID, Status: "pending"}
	for i, o := range outs {
		if i == 0 {
			st.Status = string(o.Kind)
		}
		st.Outcomes = append(st.Outcomes, summary(o))
	}
	return nil, st, nil
}

// outcomes reads stream OUTCOMES about actor from since to its end and returns those whose
// proposal or event is id.
func (s *Server) outcomes(ctx context.Context, actor string, since time.Time, id string) ([]*events.Outcome, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.StatusWait)
	defer cancel()
	t := since.UTC()
	cons, err := s.opts.JetStream.OrderedConsumer(ctx, events.StreamOutcomes, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{"world.outcomes.*." + events.ActorToken(actor)},
		DeliverPolicy:  jetstream.DeliverByStartTimePolicy, OptStartTime: &t,
	})
	if err != nil {
		return nil, fmt.Errorf("read outcomes: %w", err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("read outcomes: %w", err)
	}
	left := info.NumPending
	var out []*events.Outcome
	seen := map[string]bool{}
	for left > 0 {
		batch, err := cons.Fetch(int(min(left, 256)), jetstream.FetchMaxWait(time.Until(deadline(ctx))))
		if err != nil {
			return nil, fmt.Errorf("read outcomes: %w", err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			meta, err := m.Metadata()
			if err == nil {
				left = meta.NumPending
			}
			o, err := events.DecodeOutcome(m.Data())
			if err == nil {
				err = events.CheckOutcomeSubject(m.Subject(), o) // a body its publisher may not claim
			}
			if err != nil || seen[o.OutcomeID] || (o.ProposalID != id && o.EventID != id) {
				continue // another request's, a repeat, unreadable by this version, or forged
			}
			seen[o.OutcomeID] = true
			out = append(out, o)
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return nil, fmt.Errorf("read outcomes: %w", err)
		}
		if n == 0 {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("read outcomes: the stream did not answer within %s", s.opts.StatusWait)
			}
			break
		}
	}
	return out, nil
}

func deadline(ctx context.Context) time.Time {
	d, ok := ctx.Deadline()
	if !ok || time.Until(d) > 2*time.Second {
		return time.Now().Add(2 * time.Second)
	}
	if time.Until(d) < 10*time.Millisecond {
		return time.Now().Add(10 * time.Millisecond)
	}
	return d
}

func summary(o *events.Outcome) OutcomeSummary {
	s := OutcomeSummary{Kind: string(o.Kind), ProposalID: o.ProposalID, ProposalKind: o.ProposalKind, EventID: o.EventID,
		FallbackReason: o.FallbackReason, DecidedUTC: o.DecidedUTC.UTC().Format(time.RFC3339Nano)}
	if o.Event != nil {
		s.EventType, s.Text = o.Event.Type, o.Text()
	}
	if o.Journey != nil {
		for _, h := range o.Journey.Gates {
			s.Gates = append(s.Gates, h.Gate+":"+h.Outcome)
		}
	}
	if r := o.Refusal; r != nil {
		s.Gate, s.Code, s.Reason, s.Transient, s.RetryAfter = r.Gate, string(r.Code), r.Reason, r.Transient, r.RetryAfter
	}
	return s
}
