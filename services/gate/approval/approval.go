// Package approval keeps destructive proposals waiting for a person and carries out that
// person's decision. Held proposals live in the KV bucket natsx.BucketApprovals, so they survive
// restarts of every process; a decision is a compare-and-set on the record, so two people (or
// an approval racing an expiry) cannot both decide.
//
//	store, err := approval.Open(ctx, js)
//	pending, err := store.List(ctx, approval.StatusPending)
//	rec, err := store.Show(ctx, proposalID)
//	err = store.Request(ctx, approval.Decision{ProposalID: id, Status: approval.StatusApproved, By: "ops:ada"})
//	rec, err = store.Await(ctx, id) // until the approval gate has carried it out
//
// A person never moves a proposal: the worldgate CLI (the operator) publishes a decision on
// proposals.decisions and reads the bucket; the approval gate, the only writer of the bucket,
// applies the decision (Apply: Approve forwards the proposal to its next hop, Reject publishes
// APPROVAL_DENIED) exactly as it would its own expiry. So the operator's NATS user needs no
// right to write held proposals nor to publish to any gate, and cannot slip a proposal past
// the gates.
package approval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/events/slip"
	"github.com/worldgate/worldgate/shared/attest"
	"github.com/worldgate/worldgate/shared/natsx"
	"github.com/worldgate/worldgate/shared/natsx/natsauth"
)

// Gate is the gate name decisions are recorded under.
const Gate = "approval"

// Status of a held proposal.
type Status string

// Statuses. Only pending records can be decided.
const (
	StatusPending  Status = "pending"
	StatusApproved Status = "approved"
	StatusRejected Status = "rejected"
	StatusExpired  Status = "expired"
)

// Record is one held proposal and, once decided, the decision.
type Record struct {
	ProposalID    string           `json:"proposalId"`
	Kind          string           `json:"kind"`
	CorrelationID string           `json:"correlationId"`
	Attempt       int              `json:"attempt"`
	Status        Status           `json:"status"`
	HeldUTC       time.Time        `json:"heldUtc"`
	ExpiresUTC    *time.Time       `json:"expiresUtc,omitempty"`
	DecidedBy     string           `json:"decidedBy,omitempty"`
	DecidedUTC    *time.Time       `json:"decidedUtc,omitempty"`
	Reason        string           `json:"reason,omitempty"`
	Published     bool             `json:"published"` // the decision's message is on the bus
	Proposal      *events.Proposal `json:"proposal"`
}

// Errors.
var (
	ErrNotFound       = errors.New("no held proposal with that id")
	ErrAlreadyDecided = errors.New("the proposal was already decided")
)

// Store is the approvals bucket plus the JetStream context decisions are published with.
type Store struct {
	kv     jetstream.KeyValue
	js     jetstream.JetStream
	now    func() time.Time
	signer *attest.Signer // the approval gate's key: only the gate carries out decisions
	user   string         // the NATS user of the connection: the operator publishing decisions
}

// Open binds to the approvals bucket (provisioned by natsx.Provision).
func Open(ctx context.Context, js jetstream.JetStream) (*Store, error) {
	if js == nil {
		return nil, errors.New("approval: a JetStream context is required")
	}
	kv, err := js.KeyValue(ctx, natsx.BucketApprovals)
	if err != nil {
		return nil, fmt.Errorf("approvals bucket %s: %w (provision the topology first)", natsx.BucketApprovals, err)
	}
	st := &Store{kv: kv, js: js, now: time.Now}
	if nc := js.Conn(); nc != nil {
		st.user = nc.Opts.User
	}
	return st, nil
}

// WithClock returns a copy of s that reads time from now (tests of expiry).
func (s *Store) WithClock(now func() time.Time) *Store {
	c := *s
	c.now = now
	return &c
}

// WithSigner returns a copy of s that signs the decisions it carries out with the approval
// gate's key (the approval gate's store; people's stores only Request).
func (s *Store) WithSigner(signer *attest.Signer) *Store {
	c := *s
	c.signer = signer
	return &c
}

// Key is the KV key of a proposal id: KV keys cannot hold ':' and treat '.' as a separator, so
// both are escaped (the proposal id alphabet has no '=').
func Key(proposalID string) string {
	return strings.NewReplacer(":", "=3A", ".", "=2E").Replace(proposalID)
}

// Hold stores p (its trail already carrying the held hop) as pending. Holding the same attempt
// again (a redelivery) changes nothing; a newer attempt replaces a decided record.
func (s *Store) Hold(ctx context.Context, p *events.Proposal, expiry time.Duration) error {
	now := s.now().UTC()
	rec := Record{ProposalID: p.ProposalID, Kind: p.Kind, CorrelationID: p.CorrelationID, Attempt: p.Attempt,
		Status: StatusPending, HeldUTC: now, Proposal: p}
	if expiry > 0 {
		exp := now.Add(expiry)
		rec.ExpiresUTC = &exp
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode held proposal %s: %w", p.ProposalID, err)
	}
	key := Key(p.ProposalID)
	if _, err := s.kv.Create(ctx, key, data); err == nil {
		return nil
	} else if !errors.Is(err, jetstream.ErrKeyExists) {
		return fmt.Errorf("hold proposal %s in %s: %w", p.ProposalID, natsx.BucketApprovals, err)
	}
	old, rev, err := s.get(ctx, p.ProposalID)
	if err != nil {
		return err
	}
	if old.Attempt >= p.Attempt || old.Status == StatusPending {
		return nil // already held (a redelivery), or an older attempt still waiting for its decision
	}
	if _, err := s.kv.Update(ctx, key, data, rev); err != nil {
		return fmt.Errorf("hold proposal %s (attempt %d): %w", p.ProposalID, p.Attempt, err)
	}
	return nil
}

func (s *Store) get(ctx context.Context, id string) (Record, uint64, error) {
	e, err := s.kv.Get(ctx, Key(id))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Record{}, 0, fmt.Errorf("proposal %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Record{}, 0, fmt.Errorf("read held proposal %s: %w", id, err)
	}
	var r Record
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		return Record{}, 0, fmt.Errorf("held proposal %s is not readable: %w", id, err)
	}
	return r, e.Revision(), nil
}

// Show returns the record of one held (or decided) proposal.
func (s *Store) Show(ctx context.Context, proposalID string) (Record, error) {
	r, _, err := s.get(ctx, proposalID)
	return r, err
}

// Unreadable is an entry of the approvals bucket that is not a readable record: what a listing
// shows in its place, so that one bad entry does not hide the others.
type Unreadable struct {
	Key      string
	Sequence uint64 // the entry's revision: its sequence in the bucket's stream
	Reason   string
}

func (u Unreadable) String() string {
	return fmt.Sprintf("the record under key %s (sequence %d) could not be read: %s", u.Key, u.Sequence, u.Reason)
}

// Listing is what List finds: the readable records, oldest first, and the unreadable entries,
// by sequence.
type Listing struct {
	Records    []Record
	Unreadable []Unreadable
}

// List returns the records with one of statuses (every record when none is given), oldest
// first. An entry that is not a readable record is left out (Scan reports it); only a bucket
// that cannot be read is an error.
func (s *Store) List(ctx context.Context, statuses ...Status) ([]Record, error) {
	l, err := s.Scan(ctx, statuses...)
	return l.Records, err
}

// Scan is List with the entries that could not be read as records, each with its sequence and
// why.
func (s *Store) Scan(ctx context.Context, statuses ...Status) (Listing, error) {
	keys, err := natsx.ListKeys(ctx, s.js, natsx.BucketApprovals)
	if err != nil {
		return Listing{}, fmt.Errorf("list %s: %w", natsx.BucketApprovals, err)
	}
	out := Listing{Records: []Record{}}
	for _, k := range keys {
		e, err := s.kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return Listing{}, fmt.Errorf("read %s: %w", k, err)
		}
		var r Record
		if err := json.Unmarshal(e.Value(), &r); err != nil {
			out.Unreadable = append(out.Unreadable, Unreadable{Key: k, Sequence: e.Revision(), Reason: "it is not a held proposal's record: " + err.Error()})
			continue
		}
		if r.ProposalID == "" {
			out.Unreadable = append(out.Unreadable, Unreadable{Key: k, Sequence: e.Revision(), Reason: "it has no proposalId"})
			continue
		}
		if len(statuses) == 0 || contains(statuses, r.Status) {
			out.Records = append(out.Records, r)
		}
	}
	sort.Slice(out.Records, func(i, j int) bool { return out.Records[i].HeldUTC.Before(out.Records[j].HeldUTC) })
	sort.Slice(out.Unreadable, func(i, j int) bool { return out.Unreadable[i].Sequence < out.Unreadable[j].Sequence })
	return out, nil
}

func contains(ss []Status, s Status) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// Decision is what a person decides about a held proposal, as published on
// events.SubjectDecisions for the approval gate to apply.
type Decision struct {
	ProposalID string    `json:"proposalId"`
	Status     Status    `json:"status"` // approved or rejected
	By         string    `json:"by"`
	Reason     string    `json:"reason,omitempty"`
	AtUTC      time.Time `json:"atUtc"`
}

// Validate says what is wrong with d, if anything.
func (d Decision) Validate() error {
	switch {
	case d.ProposalID == "":
		return errors.New("a decision needs the proposal id")
	case d.Status != StatusApproved && d.Status != StatusRejected:
		return fmt.Errorf("a decision approves or rejects, not %q", d.Status)
	case strings.TrimSpace(d.By) == "":
		return errors.New("say who decides: a person's id is required")
	case d.Status == StatusRejected && strings.TrimSpace(d.Reason) == "":
		return errors.New("a reason is required to reject a proposal: say why, so its author can act on it")
	}
	return nil
}

// Request publishes d for the approval gate, after checking that the proposal is held and
// still pending. Requesting the same decision twice is stored once.
func (s *Store) Request(ctx context.Context, d Decision) error {
	if err := d.Validate(); err != nil {
		return err
	}
	r, _, err := s.get(ctx, d.ProposalID)
	if err != nil {
		return err
	}
	if r.Status != StatusPending {
		return fmt.Errorf("proposal %s was already %s by %s: %w", d.ProposalID, r.Status, r.DecidedBy, ErrAlreadyDecided)
	}
	if d.AtUTC.IsZero() {
		d.AtUTC = s.now().UTC()
	}
	data, err := json.Marshal(d)
	if err != nil {
		return err
	}
	by, err := s.approver(d.By)
	if err != nil {
		return err
	}
	msg := &nats.Msg{Subject: events.DecisionsSubject(by), Data: data, Header: nats.Header{}}
	msg.Header.Set(events.HeaderCorrelationID, r.CorrelationID)
	id := "decision:" + d.ProposalID + ":" + strconv.Itoa(r.Attempt) + ":" + string(d.Status) + ":" + by
	if _, err := s.js.PublishMsg(ctx, msg, jetstream.WithMsgID(id)); err != nil {
		return fmt.Errorf("publish the decision on %s: %w", d.ProposalID, err)
	}
	return nil
}

// ErrNotAnApprover is Request's error on a connection whose NATS user is no approver's.
var ErrNotAnApprover = errors.New("deciding a held proposal takes an approver's own NATS credentials (user approver-<name>, docs/nats-permissions.md)")

// approver is the subject token a decision is published under: the person whose NATS user
// this store is connected as (approver-<name>; the NATS server lets that user publish only to
// proposals.decisions.<name>), falling back to by on a server without users.
func (s *Store) approver(by string) (string, error) {
	if s.user == "" {
		return by, nil
	}
	name, ok := natsauth.ApproverOf(s.user)
	if !ok {
		return "", fmt.Errorf("connected as %q: %w", s.user, ErrNotAnApprover)
	}
	return name, nil
}

// Await polls the record of proposalID until its decision is carried out (Published), and
// returns it; on ctx's end it returns the last record read with ctx's error.
func (s *Store) Await(ctx context.Context, proposalID string) (Record, error) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		r, _, err := s.get(ctx, proposalID)
		if err == nil && r.Status != StatusPending && r.Published {
			return r, nil
		}
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-t.C:
		}
	}
}

// Apply carries out d (the approval gate's side of Request). A decision that comes too late
// (the proposal expired, or someone else decided first) changes nothing and is reported with
// ErrAlreadyDecided.
func (s *Store) Apply(ctx context.Context, d Decision) (Record, error) {
	if err := d.Validate(); err != nil {
		return Record{}, err
	}
	return s.decide(ctx, d.ProposalID, d.Status, d.By, d.Reason)
}

// Approve and Reject decide directly, as Apply does; they need write access to the bucket,
// which only the approval gate has. People use Request.
//
// Approve lets the proposal continue: an "approved" hop is added and it is published to its
// next hop. Approving an approved proposal again re-publishes idempotently (same message id).
func (s *Store) Approve(ctx context.Context, proposalID, by string) (Record, error) {
	return s.decide(ctx, proposalID, StatusApproved, by, "")
}

// Reject refuses the proposal: an APPROVAL_DENIED rejection carrying reason is published to
// proposals.rejected.approval.
func (s *Store) Reject(ctx context.Context, proposalID, by, reason string) (Record, error) {
	if strings.TrimSpace(reason) == "" {
		return Record{}, errors.New("a reason is required to reject a proposal: say why, so its author can act on it")
	}
	return s.decide(ctx, proposalID, StatusRejected, by, reason)
}

// ExpireDue rejects every pending proposal whose expiry has passed with APPROVAL_EXPIRED and
// returns how many it expired.
func (s *Store) ExpireDue(ctx context.Context) (int, error) {
	pending, err := s.List(ctx, StatusPending)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range pending {
		if r.ExpiresUTC == nil || s.now().Before(*r.ExpiresUTC) {
			continue
		}
		if _, err := s.decide(ctx, r.ProposalID, StatusExpired, "system:expiry", ""); err != nil && !errors.Is(err, ErrAlreadyDecided) {
			return n, err
		}
		n++
	}
	return n, nil
}

func (s *Store) decide(ctx context.Context, id string, want Status, by, reason string) (Record, error) {
	if strings.TrimSpace(by) == "" {
		return Record{}, errors.New("say who decides: a person's id is required")
	}
	for range 10 {
		r, rev, err := s.get(ctx, id)
		if err != nil {
			return Record{}, err
		}
		if r.Status == StatusPending {
			now := s.now().UTC()
			status, decider, why := want, by, reason
			if r.ExpiresUTC != nil && !now.Before(*r.ExpiresUTC) {
				status, decider, why = StatusExpired, "system:expiry", "" // too late: it expires instead
			}
			r.Status, r.DecidedBy, r.DecidedUTC, r.Reason = status, decider, &now, why
			data, err := json.Marshal(r)
			if err != nil {
				return Record{}, err
			}
			next, err := s.kv.Update(ctx, Key(id), data, rev)
			if err != nil {
				continue // someone else decided (or expired it) first: read again
			}
			rev = next // a revision is the bucket's sequence: other keys' writes may come between
		}
		if r.Status != want {
			if !r.Published && r.Status != StatusPending {
				if err := s.publish(ctx, r); err != nil {
					return r, err
				}
			}
			return r, fmt.Errorf("proposal %s was already %s by %s: %w", id, r.Status, r.DecidedBy, ErrAlreadyDecided)
		}
		if !r.Published {
			if err := s.publish(ctx, r); err != nil {
				return r, err
			}
			r.Published = true
			data, err := json.Marshal(r)
			if err != nil {
				return r, err
			}
			// Readers wait for this mark (Await). If it fails the decision is applied again
			// later, and publishing it again is idempotent (same message id).
			if _, err := s.kv.Update(ctx, Key(id), data, rev); err != nil {
				return r, fmt.Errorf("mark the decision on %s as published: %w", id, err)
			}
		}
		return r, nil
	}
	return Record{}, fmt.Errorf("proposal %s: too many concurrent decisions; try again", id)
}

func (s *Store) sign(p *events.Proposal) error {
	if s.signer == nil {
		return errors.New("approval: only the approval gate, which holds its signing key, carries out decisions")
	}
	return s.signer.SignLast(p)
}

// publish puts the decision on the bus: the proposal to its next hop, or a rejection.
func (s *Store) publish(ctx context.Context, r Record) error {
	if r.Proposal == nil {
		return fmt.Errorf("held proposal %s has no proposal body", r.ProposalID)
	}
	p := *r.Proposal
	p.Route.Pending = append([]string(nil), p.Route.Pending...)
	p.Route.Trail = append([]events.Hop(nil), p.Route.Trail...)
	at := *r.DecidedUTC
	waited := at.Sub(r.HeldUTC)
	var m slip.Message
	var err error
	switch r.Status {
	case StatusApproved:
		slip.Record(&p, slip.Hop{Gate: Gate, Outcome: events.OutcomeApproved, At: at, Took: waited})
		p.Route.Trail[len(p.Route.Trail)-1].Approver = r.DecidedBy
		if err := s.sign(&p); err != nil {
			return err
		}
		m, err = slip.Forward(&p, Gate)
	case StatusRejected:
		slip.Record(&p, slip.Hop{Gate: Gate, Outcome: events.OutcomeRejected, Code: events.CodeApprovalDenied, At: at, Took: waited})
		p.Route.Trail[len(p.Route.Trail)-1].Approver = r.DecidedBy
		if err := s.sign(&p); err != nil {
			return err
		}
		m, err = slip.Rejected(slip.Rejection(&p, Gate, slip.Verdict{Code: events.CodeApprovalDenied,
			Reason:  fmt.Sprintf("%s rejected this %s proposal: %s", r.DecidedBy, p.Kind, r.Reason),
			Details: map[string]any{"decidedBy": r.DecidedBy, "reason": r.Reason}}, at))
	case StatusExpired:
		slip.Record(&p, slip.Hop{Gate: Gate, Outcome: events.OutcomeRejected, Code: events.CodeApprovalExpired, At: at, Took: waited})
		if err := s.sign(&p); err != nil {
			return err
		}
		m, err = slip.Rejected(slip.Rejection(&p, Gate, slip.Verdict{Code: events.CodeApprovalExpired,
			Reason:  fmt.Sprintf("No one approved this %s proposal within %s; propose it again if it is still wanted.", p.Kind, r.ExpiresUTC.Sub(r.HeldUTC).Round(time.Second)),
			Details: map[string]any{"heldUtc": r.HeldUTC, "expiresUtc": r.ExpiresUTC}}, at))
	default:
		return fmt.Errorf("proposal %s is %s, not decided", r.ProposalID, r.Status)
	}
	if err != nil {
		return err
	}
	msg := &nats.Msg{Subject: m.Subject, Data: m.Data, Header: nats.Header{}}
	msg.Header.Set(events.HeaderCorrelationID, m.CorrelationID)
	msg.Header.Set(events.HeaderType, m.Kind)
	if _, err := s.js.PublishMsg(ctx, msg, jetstream.WithMsgID(m.ID)); err != nil {
		return fmt.Errorf("publish the %s decision on %s to %s: %w (the decision is recorded; run the same command again to publish it)", r.Status, r.ProposalID, m.Subject, err)
	}
	return nil
}
