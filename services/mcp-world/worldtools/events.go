package worldtools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/worldgate/worldgate/shared/mcpx"
)

// RecentEventsInput is list-recent-events' input.
type RecentEventsInput struct {
	EntityID string `json:"entityId" jsonschema:"a location or player id mentioned in the events' payload"`
	Limit    int    `json:"limit,omitempty" jsonschema:"at most this many events, 1..50 (default 10)"`
}

// CommittedEvent is a committed domain event (decoded generically).
type CommittedEvent struct {
	EventID       string         `json:"eventId"`
	Type          string         `json:"type"`
	ProposalID    string         `json:"proposalId,omitempty"`
	CorrelationID string         `json:"correlationId,omitempty"`
	OccurredUtc   string         `json:"occurredUtc,omitempty"`
	CommittedUtc  string         `json:"committedUtc,omitempty"`
	Payload       map[string]any `json:"payload" jsonschema:"the event's payload object"`
	Sequence      uint64         `json:"sequence" jsonschema:"position in the committed stream"`
}

// RecentEventsOutput is list-recent-events' output.
type RecentEventsOutput struct {
	EntityID string           `json:"entityId"`
	Events   []CommittedEvent `json:"events" jsonschema:"newest first"`
	Scanned  int              `json:"scanned" jsonschema:"how many committed messages were read"`
}

func (s *Server) listRecentEvents(ctx context.Context, _ *mcp.CallToolRequest, in RecentEventsInput) (*mcp.CallToolResult, RecentEventsOutput, error) {
	if err := checkID("entityId", in.EntityID, ""); err != nil {
		return nil, RecentEventsOutput{}, err
	}
	limit := in.Limit
	if limit == 0 {
		limit = DefaultLimit
	}
	if limit < 1 || limit > MaxLimit {
		return nil, RecentEventsOutput{}, mcpx.InvalidInput("limit is %d; it must be between 1 and %d", in.Limit, MaxLimit)
	}
	if s.opts.JetStream == nil {
		return nil, RecentEventsOutput{}, errors.New("committed events are unavailable: this server has no NATS connection")
	}
	out, err := RecentEvents(ctx, s.opts.JetStream, s.opts.Stream, in.EntityID, limit, s.opts.MaxScan)
	if err != nil {
		return nil, RecentEventsOutput{}, err
	}
	return nil, out, nil
}

// RecentEvents reads the stream backwards from its last message with direct
// gets (no consumer, no durable state), keeping events whose payload mentions
// entityID, until limit are found or maxScan messages were read.
func RecentEvents(ctx context.Context, js jetstream.JetStream, stream, entityID string, limit, maxScan int) (RecentEventsOutput, error) {
	out := RecentEventsOutput{EntityID: entityID, Events: []CommittedEvent{}}
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return out, fmt.Errorf("committed stream %s: %w", stream, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return out, fmt.Errorf("committed stream %s: %w", stream, err)
	}
	first, last := info.State.FirstSeq, info.State.LastSeq
	for seq := last; seq >= first && seq > 0 && out.Scanned < maxScan && len(out.Events) < limit; seq-- {
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		msg, err := st.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // deleted or purged
		}
		if err != nil {
			return out, fmt.Errorf("reading committed event %d: %w", seq, err)
		}
		out.Scanned++
		var ev CommittedEvent
		if json.Unmarshal(msg.Data, &ev) != nil || ev.Payload == nil {
			continue // not a domain event; skip rather than fail the call
		}
		if !mentions(ev.Payload, entityID) {
			continue
		}
		ev.Sequence = msg.Sequence
		out.Events = append(out.Events, ev)
	}
	return out, nil
}

// mentions reports whether any string in v (recursively) equals id.
func mentions(v any, id string) bool {
	switch t := v.(type) {
	case string:
		return t == id
	case []any:
		for _, e := range t {
			if mentions(e, id) {
				return true
			}
		}
	case map[string]any:
		for _, e := range t {
			if mentions(e, id) {
				return true
			}
		}
	}
	return false
}
