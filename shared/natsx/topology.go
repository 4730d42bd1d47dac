package natsx

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/events"
)

// Topology is the JetStream layout Worldgate runs on: its streams and key-value buckets.
type Topology struct {
	Streams []jetstream.StreamConfig
	Buckets []jetstream.KeyValueConfig
}

// KV bucket names.
const (
	BucketAICache   = "worldgate-ai-cache"
	BucketDedup     = "worldgate-dedup"
	BucketRate      = "worldgate-rate"
	BucketApprovals = "worldgate-approvals"
	BucketRetries   = "worldgate-gate-retries"
	// The ai-worker's LLM budgets: definitions, overrides and actor policies (kept), and the
	// spend windows, minute and hour ones expiring after 2 hours, day and month ones after
	// 33 days.
	BucketBudget      = "worldgate-budget"
	BucketBudgetShort = "worldgate-budget-short"
	BucketBudgetLong  = "worldgate-budget-long"
	// The interaction memory: per NPC–player pair the last committed exchanges, per NPC its
	// recent committed events (written by the memory-writer from COMMITTED, read by mcp-world).
	BucketMemory = "worldgate-memory"
	// BucketMembers holds one key per live replica of a partitioned consumer
	// (<handler>.<member id>), put every second and gone MembersTTL after the last put: the
	// replicas share the partitions among the members they see (runtime.Partitioned).
	BucketMembers = "worldgate-members"
)

// MembersTTL is how long a replica of a partitioned consumer counts as a member after its last
// heartbeat.
const MembersTTL = 5 * time.Second

// DefaultPartitions is how many partitions validated proposals are spread over by default: more
// than the event-processor replicas a cluster is expected to run, so that replicas can be added
// without re-partitioning.
const DefaultPartitions = 16

// MaxPartitions bounds -partitions.
const MaxPartitions = 256

// TopologyOptions are the knobs operators turn; the zero value is the single-node default.
type TopologyOptions struct {
	Replicas        int           // 1 on one node; 3 in production
	DuplicateWindow time.Duration // every stream's Nats-Msg-Id window; default 10m
	AICacheTTL      time.Duration // overrides Limits[BucketAICache].MaxAge
	DedupTTL        time.Duration // overrides Limits[BucketDedup].MaxAge (how long accepted content fingerprints are remembered)
	MaxMsgSize      int32         // default 1 MiB
	// Partitions is how many partitions the PROPOSALS stream spreads validated proposals over
	// (by their order token); default DefaultPartitions. It is fixed once the stream has it:
	// Provision refuses to change it in place.
	Partitions int
	// Limits per stream and bucket name; a missing name or a zero field keeps the default
	// (DefaultLimits). A bucket's MaxAge is its keys' TTL.
	Limits map[string]Limits
}

// Limits are how long a stream or bucket keeps messages and how many bytes it may hold. A
// stream at its size limit drops its oldest messages; a bucket at its limit refuses writes.
type Limits struct {
	MaxAge   time.Duration
	MaxBytes int64
}

const (
	gibByte = int64(1) << 30
	mib     = int64(1) << 20
)

// DefaultLimits are the retention defaults (docs/retention.md explains them): every stream and
// bucket is bounded in age and in size. JetStream reserves every stream's MaxBytes (times its
// replicas) against the server's file store when the stream is created, so the defaults add up
// to about 7.4 GiB (the embedded server makes room for them on a disk with less free space, see
// EmbeddedConfig.MaxStore); size production's with -retention.
var DefaultLimits = map[string]Limits{
	events.StreamWorld:     {24 * time.Hour, 1 * gibByte},
	events.StreamProposals: {24 * time.Hour, 2 * gibByte},
	events.StreamOutcomes:  {24 * time.Hour, 512 * mib},
	events.StreamCommitted: {30 * 24 * time.Hour, 2 * gibByte},
	events.StreamAudit:     {30 * 24 * time.Hour, 1 * gibByte},
	events.StreamDLQ:       {14 * 24 * time.Hour, 256 * mib},
	BucketAICache:          {24 * time.Hour, 256 * mib},
	BucketDedup:            {time.Hour, 64 * mib},
	// The rate gate keeps an admission marker per proposal (about 160 B) for the TTL besides its
	// windows: 100 proposals/s fill 110 MiB in 2 h; the soak filled 16 MiB in 17 minutes.
	BucketRate:        {2 * time.Hour, 256 * mib},
	BucketApprovals:   {30 * 24 * time.Hour, 64 * mib},
	BucketRetries:     {24 * time.Hour, 16 * mib},
	BucketBudget:      {0, 16 * mib}, // definitions and overrides: kept until changed (no TTL)
	BucketBudgetShort: {2 * time.Hour, 64 * mib},
	BucketBudgetLong:  {33 * 24 * time.Hour, 64 * mib},
	BucketMemory:      {7 * 24 * time.Hour, 64 * mib},
	BucketMembers:     {MembersTTL, 1 * mib}, // a key per live replica of a partitioned consumer
}

// limits is name's limits with opts applied over the default.
func (o TopologyOptions) limits(name string) Limits {
	l := DefaultLimits[name]
	if set, ok := o.Limits[name]; ok {
		l.MaxAge = cmpOr(set.MaxAge, l.MaxAge)
		if set.MaxBytes != 0 {
			l.MaxBytes = set.MaxBytes
		}
	}
	return l
}

// DefaultTopology is Worldgate's topology with opts applied.
func DefaultTopology(opts TopologyOptions) Topology {
	r := max(opts.Replicas, 1)
	dup := cmpOr(opts.DuplicateWindow, 10*time.Minute)
	size := opts.MaxMsgSize
	if size == 0 {
		size = 1 << 20
	}
	stream := func(name string, subjects []string, desc string) jetstream.StreamConfig {
		l := opts.limits(name)
		return jetstream.StreamConfig{
			Name: name, Description: desc, Subjects: subjects,
			Retention: jetstream.LimitsPolicy, Storage: jetstream.FileStorage, Replicas: r,
			// the server refuses a window longer than the stream keeps messages
			MaxAge: l.MaxAge, MaxBytes: l.MaxBytes, Duplicates: min(dup, l.MaxAge), MaxMsgSize: size, Discard: jetstream.DiscardOld,
		}
	}
	bucket := func(name, desc string, ttl time.Duration, history uint8) jetstream.KeyValueConfig {
		l := opts.limits(name)
		return jetstream.KeyValueConfig{Bucket: name, Description: desc, TTL: cmpOr(ttl, l.MaxAge), MaxBytes: l.MaxBytes,
			Replicas: r, Storage: jetstream.FileStorage, History: history}
	}
	// The DLQ takes the largest dead letter whatever the other streams accept: the runtime
	// bounds a dead letter's body and headers (DeadLetterMax).
	dlq := stream(events.StreamDLQ, []string{events.SubjectDeadLetterAll}, "Messages a stage gave up on, with the reason in headers")
	dlq.MaxMsgSize = max(size, DeadLetterMax)
	proposals := stream(events.StreamProposals, []string{events.SubjectProposalsAll}, "Proposals on their way through the gates, validated and rejected")
	proposals.SubjectTransform = PartitionTransform(cmp.Or(opts.Partitions, DefaultPartitions))
	return Topology{
		Streams: []jetstream.StreamConfig{
			stream(events.StreamWorld, WorldSubjects(), "World events published by game backends"),
			proposals,
			stream(events.StreamCommitted, []string{events.SubjectCommittedAll}, "Canonical log of applied domain events (event-processor only)"),
			stream(events.StreamAudit, []string{events.SubjectAuditAll}, "Audit records, written before persistence"),
			dlq,
			// Kept as long as proposals: Watch resumes from a sequence or a time inside it. Its
			// duplicate window makes a redelivered decision one outcome.
			stream(events.StreamOutcomes, []string{events.SubjectOutcomesAll}, "Final decisions: committed, fallback or refused, one per request and agent role"),
		},
		Buckets: []jetstream.KeyValueConfig{
			bucket(BucketAICache, "AI output by context hash", opts.AICacheTTL, 0),
			bucket(BucketDedup, "Fingerprints of recently accepted content", opts.DedupTTL, 0),
			bucket(BucketRate, "Rate windows, updated with compare-and-set", 0, 0),
			bucket(BucketApprovals, "Proposals waiting for a person, and decisions", 0, 5),
			bucket(BucketRetries, "Tickets for proposals a gate refused transiently: what it will take back on its retry subject", 0, 0),
			bucket(BucketBudget, "LLM budget definitions, operators' overrides and pauses, actor policies", 0, 0),
			bucket(BucketBudgetShort, "LLM budget windows of a minute or an hour, updated with compare-and-set", 0, 0),
			bucket(BucketBudgetLong, "LLM budget windows of a day or a month, updated with compare-and-set", 0, 0),
			bucket(BucketMemory, "Interaction memory: recent committed dialogue per NPC and player, recent events per NPC", 0, 0),
			bucket(BucketMembers, "Live replicas of partitioned consumers, one key each, gone a few seconds after the replica", 0, 0),
		},
	}
}

// StoreBytes is what t reserves on each server that holds a replica of everything: the sum of
// its streams' and buckets' MaxBytes. JetStream refuses to create a stream whose MaxBytes does
// not fit in what the server's store limit (max_file_store; by default three quarters of the
// disk free when it started) has left.
func (t Topology) StoreBytes() int64 {
	var n int64
	for _, s := range t.Streams {
		n += max(s.MaxBytes, 0)
	}
	for _, b := range t.Buckets {
		n += max(b.MaxBytes, 0)
	}
	return n
}

// gib is n bytes in GiB, for messages.
func gib(n int64) string { return fmt.Sprintf("%.1f GiB", float64(n)/float64(gibByte)) }

// PartitionTransform is the PROPOSALS stream's subject transform: a validated proposal published
// to proposals.validated.<token> is stored as proposals.validated.<partition>.<token>, the
// partition a hash of the token (the server's partition() mapping), so that every proposal of
// one actor lands on one partition, which one event-processor replica at a time consumes.
func PartitionTransform(n int) *jetstream.SubjectTransformConfig {
	return &jetstream.SubjectTransformConfig{Source: events.SubjectValidatedEntry,
		Destination: fmt.Sprintf("proposals.validated.{{partition(%d,1)}}.{{wildcard(1)}}", n)}
}

// transformPartitions is the partition count of a PROPOSALS transform; 0 for none.
func transformPartitions(t *jetstream.SubjectTransformConfig) int {
	if t == nil {
		return 0
	}
	var n int
	if _, err := fmt.Sscanf(t.Destination, "proposals.validated.{{partition(%d,1)}}", &n); err != nil {
		return 0
	}
	return n
}

// ProposalPartitions is how many partitions the PROPOSALS stream on the server spreads validated
// proposals over: what the event-processor's replicas share. A stream without the transform
// (provisioned before partitioned commits) is an error saying how to provision it.
func ProposalPartitions(ctx context.Context, js jetstream.JetStream) (int, error) {
	s, err := js.Stream(ctx, events.StreamProposals)
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", events.StreamProposals, err)
	}
	n := transformPartitions(s.CachedInfo().Config.SubjectTransform)
	if n <= 0 {
		return 0, fmt.Errorf("stream %s has no partitions (it was provisioned before partitioned commits): provision it again (worldgate provision, or start a worker with -provision)", events.StreamProposals)
	}
	return n, nil
}

// WorldSubjects are the subjects WORLD stores: one per known event type. A publish to any
// other world.events subject is refused at once (JetStream answers "no responders": no stream
// takes it), so the publisher learns of its mistake instead of the message being stored and
// never consumed.
func WorldSubjects() []string {
	types := events.EventTypes()
	out := make([]string, len(types))
	for i, t := range types {
		out[i] = events.Subject(t)
	}
	return out
}

func cmpOr(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// Provision makes the server's streams and buckets match t: it creates what is missing,
// updates what differs (logging each changed field), and leaves what matches alone, so it is
// safe to run at every start of every worker. A difference the server cannot apply in place
// (storage type, retention policy) is an error naming the stream and field, never ignored.
func Provision(ctx context.Context, js jetstream.JetStream, t Topology, log *slog.Logger) error {
	for _, s := range t.Streams {
		if s.SubjectTransform != nil && s.Name == events.StreamProposals {
			if n := transformPartitions(s.SubjectTransform); n < 1 || n > MaxPartitions {
				return fmt.Errorf("stream %s: %d partitions; want 1 to %d (-partitions)", s.Name, n, MaxPartitions)
			}
		}
	}
	for _, want := range t.Streams {
		if err := provisionStream(ctx, js, want, log); err != nil {
			return explainStorage(t, explainDenied(js, err))
		}
	}
	for _, want := range t.Buckets {
		if err := provisionBucket(ctx, js, want, log); err != nil {
			return explainStorage(t, explainDenied(js, err))
		}
	}
	return nil
}

// explainStorage says what to do when the server refused a stream or bucket for want of store:
// JetStream reserves each one's MaxBytes when it is created.
func explainStorage(t Topology, err error) error {
	if !insufficientStorage(err) {
		return err
	}
	return fmt.Errorf("%w: JetStream reserves every stream's and bucket's size limit when it creates it, and the topology's add up to %s per server: "+
		"raise the servers' store limit (max_file_store; by default three quarters of the disk free when the server started) or lower the limits (-retention, docs/retention.md)",
		err, gib(t.StoreBytes()))
}

// insufficientStorage reports whether err is the server's refusal of a stream or bucket whose
// size limit does not fit in its store limit (or memory limit).
func insufficientStorage(err error) bool {
	var api *jetstream.APIError
	return errors.As(err, &api) && (api.ErrorCode == jsStorageResourcesExceeded || api.ErrorCode == jsMemoryResourcesExceeded)
}

// The server's "insufficient storage resources" (JSStorageResourcesExceededErr) and
// "insufficient memory resources" (JSMemoryResourcesExceededErr): 500s that waiting does not cure.
const (
	jsStorageResourcesExceeded jetstream.ErrorCode = 10047
	jsMemoryResourcesExceeded  jetstream.ErrorCode = 10028
)

// explainDenied names the cause when the server refused a JetStream API request for want of
// permissions (the request itself only times out): a worker's user may read the topology but
// not change it.
func explainDenied(js jetstream.JetStream, err error) error {
	last := js.Conn().LastError()
	if last == nil || !errors.Is(last, nats.ErrPermissionViolation) || !strings.Contains(last.Error(), "$JS.API.") {
		return err
	}
	return fmt.Errorf("%w: the server refused it (%v): this user may not change the topology; provision as the admin user (worldgate provision) and start workers with -provision=false", err, last)
}

func provisionStream(ctx context.Context, js jetstream.JetStream, want jetstream.StreamConfig, log *slog.Logger) error {
	s, err := js.Stream(ctx, want.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		if _, err := js.CreateStream(ctx, want); err != nil {
			return fmt.Errorf("create stream %s: %w", want.Name, err)
		}
		log.Info("stream created", "stream", want.Name, "subjects", want.Subjects, "replicas", want.Replicas)
		return nil
	}
	if err != nil {
		return fmt.Errorf("look up stream %s: %w", want.Name, err)
	}
	have := s.CachedInfo().Config
	changed := diffStream(have, want)
	if len(changed) == 0 {
		return nil
	}
	if h, w := transformPartitions(have.SubjectTransform), transformPartitions(want.SubjectTransform); h != 0 && h != w {
		return fmt.Errorf("stream %s spreads validated proposals over %d partitions on the server but %d are configured: the count cannot change in place (an actor's proposals would change partition while some wait on the old one); keep -partitions %d", want.Name, h, w, h)
	}
	for _, f := range []string{"Storage", "Retention"} {
		if _, ok := changed[f]; ok {
			return fmt.Errorf("stream %s: %s is %v on the server but configured as %v; it cannot change in place: migrate the stream or restore the setting",
				want.Name, f, reflect.ValueOf(have).FieldByName(f).Interface(), reflect.ValueOf(want).FieldByName(f).Interface())
		}
	}
	if _, err := js.UpdateStream(ctx, want); err != nil {
		return fmt.Errorf("update stream %s (%s): %w", want.Name, fieldList(changed), err)
	}
	log.Info("stream updated", "stream", want.Name, "changed", changed)
	if _, ok := changed["Subjects"]; ok {
		reportStray(ctx, s, want, log)
	}
	return nil
}

// reportStray names the messages a stream still holds on subjects it no longer takes (WORLD
// stored every world.events subject before it took only known event types): no consumer
// reads them, so they are reported with the command that removes them rather than left unseen.
func reportStray(ctx context.Context, s jetstream.Stream, want jetstream.StreamConfig, log *slog.Logger) {
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(">"))
	if err != nil {
		log.Warn("could not list the stream's subjects", "stream", want.Name, "err", err)
		return
	}
	for subject, n := range info.State.Subjects {
		taken := false
		for _, f := range want.Subjects {
			if subjectMatches(f, subject) {
				taken = true
				break
			}
		}
		if !taken {
			log.Warn("stream holds messages on a subject it no longer takes; no consumer reads them",
				"stream", want.Name, "subject", subject, "messages", n, "remove", fmt.Sprintf("nats stream purge %s --subject %s", want.Name, subject))
		}
	}
}

// subjectMatches reports whether subject matches the filter (with * and > wildcards).
func subjectMatches(filter, subject string) bool {
	f, s := strings.Split(filter, "."), strings.Split(subject, ".")
	for i, tok := range f {
		if tok == ">" {
			return len(s) > i
		}
		if i >= len(s) || (tok != "*" && tok != s[i]) {
			return false
		}
	}
	return len(f) == len(s)
}

// diffStream compares the fields Worldgate sets; fields it leaves to the server are ignored.
func diffStream(have, want jetstream.StreamConfig) map[string]string {
	out := map[string]string{}
	cmp := func(name string, a, b any) {
		if !reflect.DeepEqual(a, b) {
			out[name] = fmt.Sprintf("%v → %v", a, b)
		}
	}
	cmp("Subjects", have.Subjects, want.Subjects)
	cmp("Description", have.Description, want.Description)
	cmp("Retention", have.Retention, want.Retention)
	cmp("Storage", have.Storage, want.Storage)
	cmp("Replicas", have.Replicas, want.Replicas)
	cmp("MaxAge", have.MaxAge, want.MaxAge)
	cmp("MaxBytes", have.MaxBytes, want.MaxBytes)
	cmp("Duplicates", have.Duplicates, want.Duplicates)
	cmp("MaxMsgSize", have.MaxMsgSize, want.MaxMsgSize)
	cmp("SubjectTransform", have.SubjectTransform, want.SubjectTransform)
	cmp("Discard", have.Discard, want.Discard)
	return out
}

func fieldList(m map[string]string) string {
	parts := make([]string, 0, len(m))
	for k, v := range m {
		parts = append(parts, k+" "+v)
	}
	return strings.Join(parts, ", ")
}

func provisionBucket(ctx context.Context, js jetstream.JetStream, want jetstream.KeyValueConfig, log *slog.Logger) error {
	kv, err := js.KeyValue(ctx, want.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		if _, err := js.CreateKeyValue(ctx, want); err != nil {
			return fmt.Errorf("create bucket %s: %w", want.Bucket, err)
		}
		log.Info("bucket created", "bucket", want.Bucket, "ttl", want.TTL)
		return nil
	}
	if err != nil {
		return fmt.Errorf("look up bucket %s: %w", want.Bucket, err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return fmt.Errorf("bucket %s status: %w", want.Bucket, err)
	}
	have := st.(*jetstream.KeyValueBucketStatus).StreamInfo().Config
	if st.TTL() == want.TTL && st.History() == max(int64(want.History), 1) && have.Replicas == max(want.Replicas, 1) && have.MaxBytes == cmp.Or(want.MaxBytes, -1) {
		return nil
	}
	if _, err := js.UpdateKeyValue(ctx, want); err != nil {
		return fmt.Errorf("update bucket %s: %w", want.Bucket, err)
	}
	log.Info("bucket updated", "bucket", want.Bucket, "ttl", want.TTL, "history", want.History)
	return nil
}

// Provisioning is every worker's -provision flag and the topology it provisions.
type Provisioning struct {
	Provision bool
	Topology  TopologyOptions
}

// RegisterFlags adds -provision (default true) and the topology's flags to fs.
func (p *Provisioning) RegisterFlags(fs *flag.FlagSet) {
	fs.BoolVar(&p.Provision, "provision", true, "provision the JetStream topology at start (idempotent); false when the admin provisions (deploy/nats)")
	p.Topology.RegisterFlags(fs)
}

// AtStart is the worker's provisioning step: with -provision, Provision the default topology
// with the options, waiting up to StartupWait for a cluster that cannot answer yet; otherwise nothing (the admin provisions, and
// the worker's first bind reports what is missing).
func (p Provisioning) AtStart(ctx context.Context, js jetstream.JetStream, log *slog.Logger) error {
	if !p.Provision {
		return nil
	}
	// First a cluster that cannot answer yet is waited for with short requests (Await), then each
	// attempt may take 30 s (a cluster creates replicated streams slowly).
	if err := Await(ctx, "JetStream", log, func(ctx context.Context) error {
		_, err := js.AccountInfo(ctx)
		return err
	}); err != nil {
		return err
	}
	return awaitEach(ctx, "provisioning the topology", log, 30*time.Second, func(ctx context.Context) error {
		return Provision(ctx, js, DefaultTopology(p.Topology), log)
	})
}
