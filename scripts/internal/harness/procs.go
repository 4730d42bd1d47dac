package harness

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/events/route"
	"github.com/worldgate/worldgate/services/ai-worker/aiworker"
	"github.com/worldgate/worldgate/services/ai-worker/templates"
	"github.com/worldgate/worldgate/services/event-processor/processor"
	"github.com/worldgate/worldgate/services/gate/gates"
	graphd "github.com/worldgate/worldgate/services/graphd/server"
	"github.com/worldgate/worldgate/services/mcp-classify/classifytools"
	"github.com/worldgate/worldgate/services/mcp-lore/loretools"
	"github.com/worldgate/worldgate/services/mcp-world/worldtools"
	"github.com/worldgate/worldgate/services/memory-writer/memory"
	"github.com/worldgate/worldgate/services/worldgate/policy"
	"github.com/worldgate/worldgate/services/worldgate/programs"
	"github.com/worldgate/worldgate/shared/attest"
	"github.com/worldgate/worldgate/shared/mcpx"
	"github.com/worldgate/worldgate/shared/natsx"
	"github.com/worldgate/worldgate/shared/natsx/natsauth"
)

// Binaries the process stack runs, by name: the pipeline's programs (programs.All, those with
// Pipeline set) plus natsd (scripts/natsd).
var Binaries = binaries()

func binaries() map[string]string {
	m := map[string]string{"natsd": "github.com/worldgate/worldgate/scripts/natsd"}
	for _, p := range programs.All {
		if p.Pipeline {
			m[p.Name] = p.Package
		}
	}
	return m
}

// DefaultBinDir is where the harnesses keep the service binaries between runs: `go build`
// skips relinking a binary that is up to date, so a second run starts in seconds.
func DefaultBinDir() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "worldgate", "harness-bin")
}

// Build compiles every binary into dir with one `go build` (the build cache makes a second
// run quick).
func Build(ctx context.Context, dir string) error { return BuildFrom(ctx, "", dir) }

// BuildFrom is Build from the checkout at src ("" is the current directory's): bench builds the
// binaries of an older commit from a git worktree of it, to measure the "before" figures with
// the same harness.
func BuildFrom(ctx context.Context, src, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	args := []string{"build", "-o", dir + string(os.PathSeparator)}
	for _, pkg := range Binaries {
		args = append(args, pkg)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = src
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go build: %w\n%s", err, out)
	}
	for name, pkg := range Binaries {
		// go build names each binary after the last element of its package path.
		base := pkg[strings.LastIndexByte(pkg, '/')+1:]
		if base != name {
			if err := os.Rename(filepath.Join(dir, base), filepath.Join(dir, name)); err != nil {
				return err
			}
		}
	}
	return os.WriteFile(filepath.Join(dir, revisionFile), []byte(sourceRevision(ctx, src)+"\n"), 0o644)
}

// revisionFile, in a directory of binaries, names the commit they were built from.
const revisionFile = "REVISION"

// sourceRevision is the commit checked out at src, with "+changes" when the tree differs from
// it ("unknown" outside a git checkout): go build stamps no revision in workspace mode.
func sourceRevision(ctx context.Context, src string) string {
	git := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = src
		out, err := cmd.Output()
		return strings.TrimSpace(string(out)), err
	}
	rev, err := git("rev-parse", "--short=12", "HEAD")
	if err != nil {
		return "unknown"
	}
	if st, err := git("status", "--porcelain", "--untracked-files=no"); err == nil && st != "" {
		rev += "+changes"
	}
	return rev
}

// BinRevision is the commit the binaries in dir were built from (BuildFrom writes it), or ""
// when they were not built by the harness.
func BinRevision(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, revisionFile))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// Proc is one supervised process: when it exits (killed or crashed) it is started again after
// its restart delay, until the stack stops.
type Proc struct {
	Name  string
	Kind  string // worker, nats, graphd, mcp
	bin   string
	args  []string
	env   []string
	logW  io.Writer
	Admin string // host:port of /metrics, if any
	// Monitor is a NATS node's monitoring address (/healthz), and Server its server name.
	Monitor, Server string
	// Prof is a NATS node's or graphd's profiling address (/debug/pprof/), with ProcsOptions.Pprof.
	Prof string
	// Dir is the data directory of a NATS node or graphd (its disk use is DirSize(Dir)).
	Dir string

	mu       sync.Mutex
	cmd      *exec.Cmd
	pid      int
	starts   int
	kills    int
	delay    time.Duration // before the next restart
	exited   chan struct{}
	stopping bool
}

// PID is the running process's id (0 while it is down).
func (p *Proc) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pid
}

// Program is the binary the process runs (a key of Binaries): "event-processor" for every
// replica of it.
func (p *Proc) Program() string { return filepath.Base(p.bin) }

// Starts is how many times the process was started.
func (p *Proc) Starts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starts
}

func (p *Proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = p.logW, p.logW
	// SIGKILL when the harness dies first (a killed bench, a test binary past its timeout), so
	// no stack outlives its run and burns the machine's CPU. Its own process group, so that a
	// terminal's ^C reaches the harness, which stops the stack in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	p.cmd, p.pid = cmd, cmd.Process.Pid
	p.starts++
	p.exited = make(chan struct{})
	return nil
}

// supervise restarts the process whenever it exits, until stop.
func (p *Proc) supervise(log *slog.Logger) {
	for {
		p.mu.Lock()
		cmd, exited := p.cmd, p.exited
		p.mu.Unlock()
		err := cmd.Wait()
		p.mu.Lock()
		p.pid = 0
		close(exited)
		stopping, delay := p.stopping, p.delay
		p.delay = 0
		p.mu.Unlock()
		if stopping {
			return
		}
		if delay == 0 {
			delay = 500 * time.Millisecond
			log.Warn("process exited on its own; restarting", "process", p.Name, "err", errString(err))
		}
		time.Sleep(delay)
		p.mu.Lock()
		stopping = p.stopping
		p.mu.Unlock()
		if stopping {
			return
		}
		for p.start() != nil {
			time.Sleep(time.Second)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return "exit 0"
	}
	return err.Error()
}

// Kill sends SIGKILL; the supervisor starts the process again after down.
func (p *Proc) Kill(down time.Duration) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pid == 0 || p.stopping {
		return false
	}
	p.delay = max(down, time.Millisecond)
	p.kills++
	_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	return true
}

// stop terminates the process with SIGTERM (SIGKILL after grace) and stops supervising.
func (p *Proc) stop(grace time.Duration) {
	p.mu.Lock()
	p.stopping = true
	pid, exited := p.pid, p.exited
	p.mu.Unlock()
	if pid == 0 || exited == nil {
		return
	}
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(grace):
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-exited
	}
}

// ProcsOptions configure the process stack.
type ProcsOptions struct {
	BinDir  string // built binaries (Build)
	DataDir string // NATS store, graph data, logs
	// Split runs each gate as its own process; otherwise one gate process runs them all.
	Split bool
	// NoFusion runs the gate processes with -fuse=false (each gate hops through JetStream even
	// to a gate of its own process), connected as the unfused set's user (gates-unfused); so
	// does -fuse=false among GateFlags.
	NoFusion bool
	// NATSNodes is how many NATS servers run: 1, or 3 (a JetStream cluster with routes between
	// the nodes, every stream and bucket R3). Default 1.
	NATSNodes int
	// Topology is provisioned by the admin user (Replicas is set from NATSNodes); the workers
	// start with -provision=false, as in production.
	Topology natsx.TopologyOptions
	// Processors is how many event-processor replicas run (default 1), each its own process
	// with its own admin port, named ProcessorName(i), the same flags otherwise.
	Processors int
	// MarkerHorizon, if set, is the event-processor's -marker-horizon (it must cover WORLD's and
	// PROPOSALS' max ages in Topology.Limits).
	MarkerHorizon time.Duration
	// MemoryWriter also runs the memory-writer (the interaction memory, from COMMITTED), as a
	// deployment and the embedded stack do: bench counts its CPU as the pipeline's.
	MemoryWriter bool
	// GateFlags are appended to every gate process's flags (after the harness's own, so they
	// win): bench's -compare runs the same stack with the gates unfused (-fuse=false).
	GateFlags []string
	// LogLevel is the workers' and graphd's -log-level (default warn); chaos -log-level info
	// logs the partitions each event-processor replica takes and gives up.
	LogLevel string
	// Pprof starts the workers (event-processors, gates, ai-worker, memory-writer) with -pprof, so
	// that their admin addresses serve Go's profiles (Profile); binaries from before the flag
	// start without it.
	Pprof  bool
	Logger *slog.Logger
}

// Procs is the pipeline as one OS process per component: natsd (one node or three), graphd, the
// three MCP servers, the event-processor (one process per replica), the gates, the ai-worker and,
// if asked, the memory-writer, each supervised. Every
// component connects to NATS as its own user of the policy (services/worldgate/policy), with
// the permissions production gives it; the harness itself connects as the admin.
type Procs struct {
	List    []*Proc
	NATSURL string // every node's client URL, comma-separated
	graph   string
	Conn    *nats.Conn
	JS      jetstream.JetStream
	log     *slog.Logger
	logFile *os.File
}

// NATSNodes are the NATS server processes.
func (ps *Procs) NATSNodes() []*Proc { return ps.ofKind("nats") }

func (ps *Procs) ofKind(kind string) []*Proc {
	var out []*Proc
	for _, p := range ps.List {
		if p.Kind == kind {
			out = append(out, p)
		}
	}
	return out
}

// Processors are the event-processor replicas (ProcessorName(0), ProcessorName(1), …).
func (ps *Procs) Processors() []*Proc {
	var out []*Proc
	for _, p := range ps.List {
		if p.Program() == processorProgram {
			out = append(out, p)
		}
	}
	return out
}

// processorProgram is the event-processor's binary (Binaries).
const processorProgram = "event-processor"

// ProcessorName is the process name of event-processor replica i (from 0): "event-processor",
// then "event-processor-2", "event-processor-3", …
func ProcessorName(i int) string {
	if i == 0 {
		return processorProgram
	}
	return fmt.Sprintf("%s-%d", processorProgram, i+1)
}

// IsProcessor reports whether name (a process name, as in Usage's keys) is an event-processor
// replica's.
func IsProcessor(name string) bool {
	rest, ok := strings.CutPrefix(name, processorProgram)
	if !ok {
		return false
	}
	if rest == "" {
		return true
	}
	n, err := strconv.Atoi(strings.TrimPrefix(rest, "-"))
	return strings.HasPrefix(rest, "-") && err == nil && n >= 2
}

// NodeOf is the NATS process running the server named server, or nil.
func (ps *Procs) NodeOf(server string) *Proc {
	for _, p := range ps.NATSNodes() {
		if p.Server == server {
			return p
		}
	}
	return nil
}

// NATSHealthy reports whether every NATS node is up and answers /healthz with 200 (JetStream
// current: its streams and consumers caught up with their peers).
func (ps *Procs) NATSHealthy() bool {
	c := &http.Client{Timeout: 2 * time.Second}
	for _, p := range ps.NATSNodes() {
		if p.PID() == 0 || p.Monitor == "" {
			return false
		}
		resp, err := c.Get("http://" + p.Monitor + "/healthz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false
		}
	}
	return true
}

// NATSMessages is what the NATS nodes have received and sent since they started (/varz
// in_msgs and out_msgs, summed over the nodes): publishes, acknowledgements, requests and
// their answers, deliveries, routed copies. False if a node did not answer.
func (ps *Procs) NATSMessages() (in, out uint64, ok bool) {
	c := &http.Client{Timeout: 2 * time.Second}
	for _, p := range ps.NATSNodes() {
		if p.Monitor == "" {
			return 0, 0, false
		}
		resp, err := c.Get("http://" + p.Monitor + "/varz")
		if err != nil {
			return 0, 0, false
		}
		var v struct {
			InMsgs  uint64 `json:"in_msgs"`
			OutMsgs uint64 `json:"out_msgs"`
		}
		err = json.NewDecoder(resp.Body).Decode(&v)
		_ = resp.Body.Close()
		if err != nil {
			return 0, 0, false
		}
		in, out = in+v.InMsgs, out+v.OutMsgs
	}
	return in, out, true
}

// StreamLeader is the server name of stream's current leader ("" if none is known).
func (ps *Procs) StreamLeader(ctx context.Context, stream string) string {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	s, err := ps.JS.Stream(ctx, stream)
	if err != nil || s.CachedInfo().Cluster == nil {
		return ""
	}
	return s.CachedInfo().Cluster.Leader
}

// fuses reports whether the gate binary decides consecutive gates of its process in one hop
// (it knows -fuse): a binary from before fusion (bench -bin-dir, the "before" figures) hops
// between every two gates, so it connects as the unfused set's user.
func fuses(bin string) bool { return takes(bin, "-fuse") }

// takes reports whether the binary bin lists flag in its usage.
func takes(bin, flag string) bool {
	out, _ := exec.Command(bin, "-h").CombinedOutput()
	return strings.Contains(string(out), flag)
}

// natsUsers are the policy's users, each with a random password, written for natsd -users,
// and the user of every gate in one process unfused (ProcsOptions.NoFusion).
func natsUsers(path string) (map[string]string, error) {
	rs, err := policy.Roles(gates.Builtin(), route.Default())
	if err != nil {
		return nil, err
	}
	unfused, err := policy.GateProcess(gates.Builtin(), route.Default(), gates.Builtin().OneProcess().Unfused()[0])
	if err != nil {
		return nil, err
	}
	rs = append(rs, unfused)
	pw := map[string]string{}
	for _, r := range rs {
		b := make([]byte, 18)
		if _, err := rand.Read(b); err != nil {
			return nil, err
		}
		pw[r.Name] = base64.RawURLEncoding.EncodeToString(b)
	}
	b, err := json.Marshal(natsauth.Users(rs, func(role string) string { return pw[role] }))
	if err != nil {
		return nil, err
	}
	return pw, os.WriteFile(path, b, 0o600)
}

// freePort asks the kernel for a free TCP port.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// StartProcs starts every process and waits until the workers are ready.
func StartProcs(ctx context.Context, o ProcsOptions) (ps *Procs, err error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	started := &Procs{log: o.Logger}
	ps = started
	defer func() {
		if err != nil {
			started.Stop() // ps is nil by now: every failing return returns nil
		}
	}()
	ps.logFile, err = os.Create(filepath.Join(o.DataDir, "processes.log"))
	if err != nil {
		return nil, err
	}
	ports, taken := map[string]int{}, map[int]bool{}
	port := func(name string) string {
		for ports[name] == 0 {
			p, perr := freePort()
			if perr != nil {
				if err == nil {
					err = perr
				}
				break
			}
			// The kernel may hand out a port it gave a moment ago (each is closed at once):
			// never give two names one port.
			if !taken[p] {
				ports[name], taken[p] = p, true
			}
		}
		return "127.0.0.1:" + strconv.Itoa(ports[name])
	}
	secret := "chaos-secret-chaos-secret-chaos-secret"
	token, err := mcpx.IssueJWT([]byte(secret), "chaos", []string{mcpx.ScopeWorldRead, mcpx.ScopeLoreRead, mcpx.ScopeClassifyRead}, 24*time.Hour)
	if err != nil {
		return nil, err
	}
	keysDir := filepath.Join(o.DataDir, "keys") // the gates' signing keys and the processor's keyring
	tmplFile := filepath.Join(o.DataDir, "templates.json")
	if err := templates.WriteHashes(tmplFile); err != nil {
		return nil, err
	}
	nodes := max(o.NATSNodes, 1)
	o.Topology.Replicas = nodes
	passwords, err := natsUsers(filepath.Join(o.DataDir, "nats-users.json"))
	if err != nil {
		return nil, err
	}
	var natsAddrs, urls []string
	for i := range nodes {
		a := port(fmt.Sprintf("nats-%d", i+1))
		natsAddrs = append(natsAddrs, a)
		urls = append(urls, "nats://"+a)
	}
	ps.NATSURL = strings.Join(urls, ",")
	// natsAs is a worker's connection as user, with the password natsd has for it.
	natsAs := func(user string) natsx.ConnConfig {
		return natsx.ConnConfig{URL: ps.NATSURL, User: user, Password: passwords[user]}
	}
	level := cmp.Or(o.LogLevel, "warn")
	pprof := o.Pprof && takes(filepath.Join(o.BinDir, "event-processor"), "-pprof")
	graphURL := "ws://" + port("graphd") + "/gremlin"
	ps.graph = graphURL
	_, graphPort, _ := net.SplitHostPort(port("graphd"))
	add := func(name, kind, bin string, args ...string) *Proc {
		p := &Proc{Name: name, Kind: kind, bin: filepath.Join(o.BinDir, bin), args: args, logW: &prefixWriter{w: ps.logFile, prefix: name + " "}}
		for i, a := range args {
			if a == "-admin" && i+1 < len(args) {
				p.Admin = args[i+1]
			} else if addr, ok := strings.CutPrefix(a, "-admin="); ok {
				p.Admin = addr
			}
		}
		ps.List = append(ps.List, p)
		return p
	}
	for i, a := range natsAddrs {
		name := fmt.Sprintf("nats-%d", i+1)
		_, p, _ := net.SplitHostPort(a)
		args := []string{"-name", name, "-port", p, "-store", filepath.Join(o.DataDir, name), "-users", filepath.Join(o.DataDir, "nats-users.json"),
			"-http", strings.TrimPrefix(port(name+"-http"), "127.0.0.1:")}
		if nodes > 1 {
			var routes []string
			for j := range natsAddrs {
				if j != i {
					routes = append(routes, "nats-route://"+port(fmt.Sprintf("nats-%d-cluster", j+1)))
				}
			}
			args = append(args, "-cluster", port(name+"-cluster"), "-routes", strings.Join(routes, ","))
		}
		if o.Pprof && takes(filepath.Join(o.BinDir, "natsd"), "-prof") {
			args = append(args, "-prof", strings.TrimPrefix(port(name+"-prof"), "127.0.0.1:"))
		}
		n := add(name, "nats", "natsd", args...)
		n.Monitor, n.Server, n.Dir = port(name+"-http"), name, filepath.Join(o.DataDir, name)
		if o.Pprof {
			n.Prof = port(name + "-prof")
		}
	}
	gd := graphd.DefaultServiceConfig()
	gd.Listen, gd.DataDir, gd.LogLevel = "127.0.0.1:"+graphPort, filepath.Join(o.DataDir, "graph"), level
	gd.Users = GraphWriter + ":" + GraphWriterPassword + "," + GraphReader + ":" + GraphReaderPassword + ":ro"
	gd.Pprof = o.Pprof && takes(filepath.Join(o.BinDir, "graphd"), "-pprof")
	g := add("graphd", "graphd", "graphd", gd.Args()...)
	g.Dir = gd.DataDir
	if gd.Pprof {
		g.Prof = gd.Listen
	}
	mcpProc := func(common *mcpx.CommonFlags, nc *natsx.ConnConfig, name, user string) {
		common.Listen, common.Admin, common.JWTSecret, common.RatePerSec, common.LogLevel = port(name), port(name+"-admin"), secret, 0, level
		*nc = natsAs(user)
	}
	world := worldtools.DefaultServiceConfig()
	mcpProc(&world.Common, &world.NATS, "mcp-world", natsauth.MCPWorld)
	world.Graph.URL, world.Graph.Password = graphURL, GraphReaderPassword
	add("mcp-world", "mcp", "mcp-world", world.Args()...)
	lore := loretools.DefaultServiceConfig()
	mcpProc(&lore.Common, &lore.NATS, "mcp-lore", natsauth.MCPLore)
	lore.Graph.URL, lore.Graph.Password, lore.Refresh = graphURL, GraphReaderPassword, 10*time.Second
	add("mcp-lore", "mcp", "mcp-lore", lore.Args()...)
	classify := classifytools.DefaultServiceConfig()
	mcpProc(&classify.Common, &classify.NATS, "mcp-classify", natsauth.MCPClassify)
	add("mcp-classify", "mcp", "mcp-classify", classify.Args()...)
	for i := range max(o.Processors, 1) {
		name := ProcessorName(i)
		ep := processor.DefaultConfig()
		ep.NATS = natsAs(natsauth.EventProcessor)
		ep.Provisioning.Provision = false
		ep.Graph.URL, ep.Graph.Password = graphURL, GraphWriterPassword
		ep.Admin, ep.LogLevel, ep.AttestKeys = port(name+"-admin"), level, keysDir
		ep.Pprof = pprof
		if o.MarkerHorizon > 0 {
			ep.Prune.Horizon = o.MarkerHorizon
		}
		add(name, "worker", "event-processor", ep.Args()...)
	}
	layout := gates.Builtin().OneProcess()
	if o.Split {
		layout = gates.Builtin().OneProcessPerGate()
	}
	if o.NoFusion || slices.Contains(o.GateFlags, "-fuse=false") || slices.Contains(o.GateFlags, "--fuse=false") || !fuses(filepath.Join(o.BinDir, "gate")) {
		// Unfused, a gate process publishes to the next gate even when it is its own: it
		// connects as the unfused set's user.
		layout = layout.Unfused()
	}
	// One key per gate process, shared by its gates (a process is the unit of trust): a fused
	// run is signed once (attest.RunVersion).
	var keyGroups [][]string
	for _, proc := range layout {
		keyGroups = append(keyGroups, proc.Gates)
	}
	if _, _, err := attest.EnsureShared(keysDir, keyGroups); err != nil {
		return nil, err
	}
	for _, proc := range layout {
		name := "gate-" + strings.Join(proc.Gates, "+")
		if len(layout) == 1 {
			name = "gate-all"
		}
		gc := gates.DefaultServiceConfig()
		gc.NATS = natsAs(proc.User())
		gc.Provisioning.Provision = false
		gc.Graph.URL, gc.Graph.Password = graphURL, GraphReaderPassword
		gc.Gates, gc.Fuse = strings.Join(proc.Gates, ","), !o.NoFusion // -fuse only when unfused, so binaries from before fusion start too
		gc.ClassifyURL, gc.ClassifyToken, gc.Templates = "http://"+port("mcp-classify")+"/mcp", token, tmplFile
		gc.Admin, gc.LogLevel, gc.SigningKeys = port(name+"-admin"), level, keysDir
		gc.Pprof = pprof
		gc.SetChain(GateConfig()) // the embedded stack's: budgets a load test does not hit, a 15 s reference wait
		add(name, "worker", "gate", slices.Concat(gc.Args(), o.GateFlags)...)
	}
	ai := aiworker.DefaultServiceConfig()
	ai.NATS = natsAs(natsauth.AIWorker)
	ai.Provisioning.Provision = false
	ai.Admin, ai.LogLevel, ai.Pprof = port("ai-worker-admin"), level, pprof
	ai.WorldURL, ai.LoreURL, ai.ClassifyURL = "http://"+port("mcp-world")+"/mcp", "http://"+port("mcp-lore")+"/mcp", "http://"+port("mcp-classify")+"/mcp"
	ai.MCPToken = token
	if takes(filepath.Join(o.BinDir, "ai-worker"), "-attest-keys") { // binaries from before it start too
		ai.AttestKeys = keysDir // it follows only rejections whose trail verifies
	}
	add("ai-worker", "worker", "ai-worker", ai.Args()...)
	if o.MemoryWriter {
		mw := memory.DefaultConfig()
		mw.NATS = natsAs(natsauth.MemoryWriter)
		mw.Provisioning.Provision = false
		mw.Admin, mw.LogLevel, mw.Pprof = port("memory-writer-admin"), level, pprof
		add("memory-writer", "worker", "memory-writer", mw.Args()...)
	}
	if err != nil {
		return nil, err
	}

	// NATS and the graph first, the topology, then the rest.
	infra := len(natsAddrs) + 1
	for _, p := range ps.List[:infra] {
		if err := p.start(); err != nil {
			return nil, err
		}
		go p.supervise(ps.log)
	}
	for _, a := range natsAddrs {
		if err := waitTCP(ctx, a); err != nil {
			return nil, fmt.Errorf("natsd at %s: %w", a, err)
		}
	}
	if err := waitTCP(ctx, "127.0.0.1:"+graphPort); err != nil {
		return nil, fmt.Errorf("graphd: %w", err)
	}
	ps.Conn, ps.JS, err = natsx.Connect(natsx.ConnConfig{URL: ps.NATSURL, Name: "harness", User: natsauth.Admin, Password: passwords[natsauth.Admin]}, ps.log)
	if err != nil {
		return nil, err
	}
	// A cluster takes a few seconds to elect its meta leader: provision until it answers.
	deadline := time.Now().Add(60 * time.Second)
	for {
		pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		err = natsx.Provision(pctx, ps.JS, natsx.DefaultTopology(o.Topology), ps.log)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("provision JetStream (%d NATS nodes): %w", nodes, err)
		}
		time.Sleep(time.Second)
	}
	for _, p := range ps.List[infra:] {
		if err := p.start(); err != nil {
			return nil, err
		}
		go p.supervise(ps.log)
	}
	for _, p := range ps.List {
		if p.Admin == "" {
			continue
		}
		if err := waitReady(ctx, p.Admin); err != nil {
			return nil, fmt.Errorf("%s did not become ready: %w (see %s)", p.Name, err, ps.logFile.Name())
		}
	}
	return ps, nil
}

// Usage reads every running process's CPU and memory from /proc, by process name. A process
// that is down is left out.
func (ps *Procs) Usage() map[string]ProcStat {
	out := make(map[string]ProcStat, len(ps.List))
	for _, p := range ps.List {
		if pid := p.PID(); pid > 0 {
			if st, err := ReadProc(pid); err == nil {
				out[p.Name] = st
			}
		}
	}
	return out
}

// Restarts is how many times the processes were started beyond their first start: a
// restarted process's CPU counter starts again from zero, so figures summed over a span
// with a restart in it are too low.
func (ps *Procs) Restarts() int {
	n := 0
	for _, p := range ps.List {
		n += max(p.Starts()-1, 0)
	}
	return n
}

// Lookup returns the process named name.
func (ps *Procs) Lookup(name string) *Proc {
	for _, p := range ps.List {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// Stop terminates every process: the workers and MCP servers first, then graphd, then the NATS
// nodes.
func (ps *Procs) Stop() {
	if ps.Conn != nil {
		ps.Conn.Close()
	}
	stopAll := func(keep func(*Proc) bool) {
		var wg sync.WaitGroup
		for _, p := range ps.List {
			if keep(p) {
				wg.Add(1)
				go func() { defer wg.Done(); p.stop(15 * time.Second) }()
			}
		}
		wg.Wait()
	}
	stopAll(func(p *Proc) bool { return p.Kind != "nats" && p.Kind != "graphd" })
	stopAll(func(p *Proc) bool { return p.Kind == "graphd" })
	stopAll(func(p *Proc) bool { return p.Kind == "nats" })
	if ps.logFile != nil {
		_ = ps.logFile.Close()
	}
}

// GraphURL is graphd's Gremlin URL.
func (ps *Procs) GraphURL() string { return ps.graph }

// LogPath is where every process's output goes, each line prefixed with its name.
func (ps *Procs) LogPath() string { return ps.logFile.Name() }

// DirSize is the bytes of the files under dir (0 if it cannot be read).
func DirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

func waitTCP(ctx context.Context, addr string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			return c.Close()
		}
		if time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// WaitReady waits until every process with an admin address answers /readyz.
func (ps *Procs) WaitReady(ctx context.Context) error {
	for _, p := range ps.List {
		if p.Admin != "" {
			if err := waitReady(ctx, p.Admin); err != nil {
				return fmt.Errorf("%s: %w", p.Name, err)
			}
		}
	}
	return nil
}

func waitReady(ctx context.Context, admin string) error {
	deadline := time.Now().Add(60 * time.Second)
	c := &http.Client{Timeout: 2 * time.Second}
	var last error
	for time.Now().Before(deadline) {
		resp, err := c.Get("http://" + admin + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = errors.New(resp.Status)
		}
		last = err
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("not ready after 60s: %v", last)
}

// prefixWriter prefixes each write (a log line, in practice) with the process name.
type prefixWriter struct {
	w      io.Writer
	prefix string
}

var logMu sync.Mutex // one writer at a time across processes, so prefixes stay with their lines

func (p *prefixWriter) Write(b []byte) (int, error) {
	logMu.Lock()
	defer logMu.Unlock()
	if _, err := io.WriteString(p.w, p.prefix); err != nil {
		return 0, err
	}
	return p.w.Write(b)
}
