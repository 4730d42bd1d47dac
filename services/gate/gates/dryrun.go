package gates

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/natsx"
)

// A dry run passes a proposal through the gates' own Checks in process, in route order, and
// changes nothing: no hop is recorded or published, no audit record written, nothing held.
// Shadow runs (`worldgate shadow`) judge regenerated proposals this way. Gates built on
// ReadOnly(js) read the real KV state and keep their writes in memory.

// Verdict is one gate's decision in a dry run.
type Verdict struct {
	Gate    string `json:"gate"`
	Outcome string `json:"outcome"` // passed, rejected, held, error, or skipped (not run in a dry run)
	Code    string `json:"code,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// Verdict outcomes beyond the hop outcomes.
const (
	OutcomeError   = "error"
	OutcomeSkipped = "skipped"
)

// DryRunSkips are the gates a dry run does not run: the audit gate's check is the writing of
// the audit record.
var DryRunSkips = []string{Audit}

// DryRun checks p with each gate in gs in order, as if it had arrived on subject (the emitter
// subject the schema gate reads), until one refuses or holds it or fails (an infrastructure
// error: Outcome error). Gates in DryRunSkips are reported skipped.
func DryRun(ctx context.Context, gs []Gate, p *events.Proposal, subject string) []Verdict {
	ctx = context.WithValue(ctx, subjectKey{}, subject)
	out := make([]Verdict, 0, len(gs))
	for _, g := range gs {
		if slices.Contains(DryRunSkips, g.Name()) {
			out = append(out, Verdict{Gate: g.Name(), Outcome: OutcomeSkipped, Reason: "a dry run writes no audit record"})
			continue
		}
		d, err := g.Check(ctx, p)
		if err != nil {
			return append(out, Verdict{Gate: g.Name(), Outcome: OutcomeError, Reason: err.Error()})
		}
		v := Verdict{Gate: g.Name(), Outcome: d.Outcome.String(), Code: string(d.Code), Reason: d.Reason}
		out = append(out, v)
		if d.Outcome != Passed {
			break
		}
	}
	return out
}

// ReadOnlyOptions tune ReadOnly.
type ReadOnlyOptions struct {
	// Forget are proposal ids whose dedup fingerprints reads leave out: the recorded proposals
	// a shadow run replaces, so that a regenerated text is not refused as a near-duplicate of
	// the text it stands in for.
	Forget []string
	// Fresh are buckets whose real entries are not read: the run starts them empty (the rate
	// windows, so a shadow run is measured against its own usage rather than the traffic it
	// replays, which is already counted).
	Fresh []string
}

// ReadOnly wraps js for gates whose decisions must change nothing. Key-value reads see the
// real buckets (less what o leaves out) and the run's own writes, which stay in this process's
// memory, so a later check of the same run sees an earlier one (two near-duplicate shadow
// proposals). Publishing, and creating, changing or deleting streams and buckets, fail.
func ReadOnly(js jetstream.JetStream, o ReadOnlyOptions) jetstream.JetStream {
	forget := map[string]bool{}
	for _, id := range o.Forget {
		forget[id] = true
	}
	return &readOnlyJS{JetStream: js, o: o, forget: forget, kvs: map[string]*overlayKV{}}
}

var errReadOnly = errors.New("gates: a dry run changes nothing (read-only JetStream)")

type readOnlyJS struct {
	jetstream.JetStream
	o      ReadOnlyOptions
	forget map[string]bool
	mu     sync.Mutex
	kvs    map[string]*overlayKV
}

func (r *readOnlyJS) KeyValue(ctx context.Context, bucket string) (jetstream.KeyValue, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if kv, ok := r.kvs[bucket]; ok {
		return kv, nil
	}
	real, err := r.JetStream.KeyValue(ctx, bucket)
	if err != nil {
		return nil, err
	}
	kv := &overlayKV{KeyValue: real, fresh: slices.Contains(r.o.Fresh, bucket), mem: map[string]memEntry{}, rev: 1 << 40}
	if bucket == natsx.BucketDedup && len(r.forget) > 0 {
		kv.filter = func(v []byte) []byte { return forgetFingerprints(v, r.forget) }
	}
	r.kvs[bucket] = kv
	return kv, nil
}

func (r *readOnlyJS) Publish(context.Context, string, []byte, ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	return nil, errReadOnly
}

func (r *readOnlyJS) PublishMsg(context.Context, *nats.Msg, ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	return nil, errReadOnly
}

func (r *readOnlyJS) PublishAsync(string, []byte, ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	return nil, errReadOnly
}

func (r *readOnlyJS) PublishMsgAsync(*nats.Msg, ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	return nil, errReadOnly
}

func (r *readOnlyJS) CreateKeyValue(context.Context, jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	return nil, errReadOnly
}

func (r *readOnlyJS) UpdateKeyValue(context.Context, jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	return nil, errReadOnly
}

func (r *readOnlyJS) CreateOrUpdateKeyValue(context.Context, jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	return nil, errReadOnly
}

func (r *readOnlyJS) DeleteKeyValue(context.Context, string) error { return errReadOnly }

func (r *readOnlyJS) CreateStream(context.Context, jetstream.StreamConfig) (jetstream.Stream, error) {
	return nil, errReadOnly
}

func (r *readOnlyJS) CreateOrUpdateStream(context.Context, jetstream.StreamConfig) (jetstream.Stream, error) {
	return nil, errReadOnly
}

func (r *readOnlyJS) UpdateStream(context.Context, jetstream.StreamConfig) (jetstream.Stream, error) {
	return nil, errReadOnly
}

func (r *readOnlyJS) DeleteStream(context.Context, string) error { return errReadOnly }

// overlayKV reads through to the real bucket and keeps writes in memory.
type overlayKV struct {
	jetstream.KeyValue
	fresh  bool
	filter func([]byte) []byte
	mu     sync.Mutex
	mem    map[string]memEntry
	rev    uint64
}

type memEntry struct {
	bucket, key string
	value       []byte
	rev         uint64
	at          time.Time
	op          jetstream.KeyValueOp
}

func (e memEntry) Bucket() string                  { return e.bucket }
func (e memEntry) Key() string                     { return e.key }
func (e memEntry) Value() []byte                   { return e.value }
func (e memEntry) Revision() uint64                { return e.rev }
func (e memEntry) Created() time.Time              { return e.at }
func (e memEntry) Delta() uint64                   { return 0 }
func (e memEntry) Operation() jetstream.KeyValueOp { return e.op }

func (kv *overlayKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	kv.mu.Lock()
	e, ok := kv.mem[key]
	kv.mu.Unlock()
	if ok {
		if e.op != jetstream.KeyValuePut {
			return nil, jetstream.ErrKeyNotFound
		}
		return e, nil
	}
	if kv.fresh {
		return nil, jetstream.ErrKeyNotFound
	}
	real, err := kv.KeyValue.Get(ctx, key)
	if err != nil || kv.filter == nil {
		return real, err
	}
	return memEntry{bucket: real.Bucket(), key: key, value: kv.filter(real.Value()), rev: real.Revision(), at: real.Created(), op: real.Operation()}, nil
}

// current is key's revision as this overlay sees it (0: none).
func (kv *overlayKV) current(ctx context.Context, key string) (uint64, error) {
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return e.Revision(), nil
}

func (kv *overlayKV) write(key string, value []byte, op jetstream.KeyValueOp) uint64 {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	kv.rev++
	kv.mem[key] = memEntry{bucket: kv.Bucket(), key: key, value: append([]byte(nil), value...), rev: kv.rev, at: time.Now(), op: op}
	return kv.rev
}

func (kv *overlayKV) Put(_ context.Context, key string, value []byte) (uint64, error) {
	return kv.write(key, value, jetstream.KeyValuePut), nil
}

func (kv *overlayKV) PutString(ctx context.Context, key, value string) (uint64, error) {
	return kv.Put(ctx, key, []byte(value))
}

func (kv *overlayKV) Create(ctx context.Context, key string, value []byte, _ ...jetstream.KVCreateOpt) (uint64, error) {
	rev, err := kv.current(ctx, key)
	if err != nil {
		return 0, err
	}
	if rev != 0 {
		return 0, jetstream.ErrKeyExists
	}
	return kv.write(key, value, jetstream.KeyValuePut), nil
}

func (kv *overlayKV) Update(ctx context.Context, key string, value []byte, revision uint64) (uint64, error) {
	rev, err := kv.current(ctx, key)
	if err != nil {
		return 0, err
	}
	if rev != revision {
		return 0, jetstream.ErrKeyRevisionMismatch
	}
	return kv.write(key, value, jetstream.KeyValuePut), nil
}

func (kv *overlayKV) Delete(_ context.Context, key string, _ ...jetstream.KVDeleteOpt) error {
	kv.write(key, nil, jetstream.KeyValueDelete)
	return nil
}

func (kv *overlayKV) Purge(_ context.Context, key string, _ ...jetstream.KVDeleteOpt) error {
	kv.write(key, nil, jetstream.KeyValuePurge)
	return nil
}

func (kv *overlayKV) PurgeDeletes(context.Context, ...jetstream.KVPurgeOpt) error { return errReadOnly }

// forgetFingerprints leaves the entries of the forgotten proposals out of a dedup value.
func forgetFingerprints(v []byte, forget map[string]bool) []byte {
	var fps fingerprints
	if json.Unmarshal(v, &fps) != nil {
		return v
	}
	kept := fps.Entries[:0]
	for _, e := range fps.Entries {
		if !forget[e.ProposalID] {
			kept = append(kept, e)
		}
	}
	fps.Entries = kept
	out, err := json.Marshal(fps)
	if err != nil {
		return v
	}
	return out
}

// DryRunGates builds the named gates of the registry for dry runs on ReadOnly(deps.JetStream, o).
func (r *Registry) DryRunGates(ctx context.Context, deps Deps, names []string, o ReadOnlyOptions) ([]Gate, error) {
	if deps.JetStream == nil {
		return nil, errors.New("gates: a dry run needs JetStream (it reads the gates' KV buckets)")
	}
	deps.JetStream = ReadOnly(deps.JetStream, o)
	gs, err := r.Build(ctx, deps, names)
	if err != nil {
		return nil, fmt.Errorf("dry-run gates: %w", err)
	}
	return gs, nil
}
