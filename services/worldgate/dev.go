package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/worldgate/worldgate/shared/config"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/natsx/natsauth"
	"github.com/worldgate/worldgate/shared/tracing"
)

type devFlags struct {
	dataDir     string
	host        string
	natsPort    int
	graphPort   int
	adminPort   int
	mcpPort     int
	mcpNoAuth   bool
	edgePort    int
	demoOnly    bool
	jsonOut     bool
	noDemo      bool
	syncAlways  bool
	logLevel    string
	logFile     string
	idleTimeout time.Duration
	llmConfig   string
	budgets     string // LLM budget file; "" the embedded dev budgets, "none" no budgets
	approvers   []string
	tracing     tracing.Config

	dataDirLocked bool // runDev holds the data directory's lock (lockDataDir)
}

func runDev(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var f devFlags
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.dataDir, "data-dir", ".worldgate", "where NATS, the graph and endpoints.json live; kept across runs")
	fs.StringVar(&f.host, "host", "127.0.0.1", "interface every embedded server listens on")
	fs.IntVar(&f.natsPort, "nats-port", 4222, "NATS port (0 picks a free one)")
	fs.IntVar(&f.graphPort, "graph-port", 8182, "graphd (Gremlin) port (0 picks a free one)")
	fs.IntVar(&f.adminPort, "admin-port", 9090, "port of /metrics, /healthz and /readyz for every in-process worker (0 picks a free one)")
	fs.IntVar(&f.mcpPort, "mcp-port", 8090, "port of the MCP servers (/mcp/world, /mcp/lore, /mcp/classify, /mcp/propose; 0 picks a free one)")
	fs.BoolVar(&f.mcpNoAuth, "mcp-no-auth", false, "serve the MCP servers without tokens, for clients that cannot send one (the conformance suite, scripts/mcp-conformance.sh); local development only")
	fs.IntVar(&f.edgePort, "edge-port", 8088, "port of edge, the HTTP API and the /play console (0 picks a free one)")
	fs.BoolVar(&f.demoOnly, "demo-only", false, "run the demo scenario, wait until the pipeline is idle, print a summary and exit")
	fs.BoolVar(&f.jsonOut, "json", false, "print the demo summary as one JSON line (with -demo-only)")
	fs.BoolVar(&f.noDemo, "no-demo", false, "start the stack without running the demo scenario")
	fs.BoolVar(&f.syncAlways, "sync-always", false, "fsync every JetStream write before acknowledging it (slower; survives power loss)")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&f.logFile, "log-file", "", "write JSON logs here (default <data-dir>/worldgate.log)")
	fs.StringVar(&f.llmConfig, "llm-config", "", "YAML LLM provider configuration (see README: Ollama, OpenAI-compatible, Anthropic); default: the offline scripted provider")
	fs.StringVar(&f.budgets, "budgets", "", "LLM budget file (docs/budgets.md); default: the embedded dev budgets (services/worldgate/demo/budgets.yaml); none: no budgets")
	fs.Func("approvers", "comma-separated names of the people who may approve held proposals, each with a NATS user approver-<name> in endpoints.json (default: your login name)", func(v string) error {
		f.approvers = nil
		for _, a := range strings.Split(v, ",") {
			if a = strings.TrimSpace(a); a != "" {
				if err := natsauth.CheckApprover(a); err != nil {
					return err
				}
				f.approvers = append(f.approvers, a)
			}
		}
		return nil
	})
	fs.DurationVar(&f.idleTimeout, "idle-timeout", 2*time.Minute, "with -demo-only: give up waiting for the pipeline to go idle after this long")
	f.tracing.ServiceName = "worldgate-dev"
	f.tracing.RegisterFlags(fs)
	if err := config.Parse(fs, args, config.Prefix); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return exitError{2}
	}
	if f.mcpNoAuth && !isLoopback(f.host) {
		fmt.Fprintf(stderr, "dev: -mcp-no-auth serves the MCP servers to anyone who can reach them: only with a loopback -host (not %q)\n", f.host)
		return exitError{2}
	}
	// The lock comes before anything in the data directory is opened, the log included.
	unlock, err := lockDataDir(f.dataDir)
	if err != nil {
		return err
	}
	defer unlock()
	f.dataDirLocked = true
	// The data directory holds credentials (NATS passwords, signing keys, the MCP token
	// secret): only its owner may enter it.
	if err := os.Chmod(f.dataDir, 0o700); err != nil {
		return fmt.Errorf("restrict data directory: %w", err)
	}
	logPath := f.logFile
	if logPath == "" {
		logPath = filepath.Join(f.dataDir, "worldgate.log")
	}
	logOut, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open log file: %w", err)
	}
	defer logOut.Close()
	log := logx.New(logOut, "worldgate-dev", f.logLevel)
	stopTracing, err := tracing.Setup(ctx, f.tracing) // off unless -otlp-endpoint
	if err != nil {
		return err
	}
	defer func() {
		if err := stopTracing(); err != nil {
			log.Warn("tracing: the last spans were not exported", "err", err)
		}
	}()

	say := func(format string, a ...any) {
		if !f.jsonOut {
			fmt.Fprintf(stderr, format+"\n", a...)
		}
	}
	st, err := startStack(ctx, f, log)
	if err != nil {
		return err
	}
	defer st.stop()
	say("play: %s/play/   (the console: walk the demo world, talk to its NPCs)", st.EdgeURL)
	say("worldgate dev: data in %s, logs in %s", f.dataDir, logPath)
	printEndpoints(say, st.Endpoints)
	say("  (these and the credentials — NATS users, graph users, the MCP token — are in %s, readable only by you)", filepath.Join(f.dataDir, "endpoints.json"))

	runTally, err := st.newTally(ctx)
	if err != nil {
		return err
	}
	f2, isFile := stderr.(*os.File)
	term := &termOut{w: stderr, tty: isFile && isTerminal(f2)}
	if !f.jsonOut {
		// What is committed and refused, as it happens.
		feedCtx, stopFeed := context.WithCancel(ctx)
		defer stopFeed()
		go st.feed(feedCtx, term)
	}
	if !f.noDemo {
		n, err := st.runDemo(ctx)
		if err != nil && ctx.Err() != nil {
			say("interrupted during the demo; stopping: draining in-flight messages")
			return nil
		}
		if err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		say("demo: published %d world events", n)
	}
	if f.demoOnly {
		idleCtx, cancel := context.WithTimeout(ctx, f.idleTimeout)
		defer cancel()
		if err := st.WaitIdle(idleCtx); err != nil {
			return fmt.Errorf("the pipeline did not go idle: %w", err)
		}
		sum, err := runTally.update(ctx)
		if err != nil {
			return err
		}
		return printSummary(stdout, sum, f.jsonOut)
	}
	say("serving; press Ctrl-C to stop")
	st.liveStatus(ctx, runTally, term)
	say("\nstopping: draining in-flight messages")
	return nil
}

// printEndpoints says where everything listens: every entry of endpoints.json but the
// credentials, which are never printed (they are in endpoints.json, 0600).
func printEndpoints(say func(format string, a ...any), endpoints map[string]any) {
	for _, k := range sortedKeys(endpoints) {
		if secretEndpoint(k, endpoints[k]) {
			continue
		}
		v, _ := json.Marshal(endpoints[k])
		say("  %-22s %s", k, strings.Trim(string(v), `"`))
	}
}

// secretEndpoint reports whether an endpoints.json entry is a credential: a named secret, or
// a structured value (a user and password, or the approvers' credentials by name).
func secretEndpoint(key string, v any) bool {
	switch v.(type) {
	case string, bool, int, int64, float64, nil:
	default:
		return true
	}
	return strings.Contains(key, "token") || strings.Contains(key, "password") || strings.Contains(key, "secret") || strings.HasSuffix(key, ".key")
}

func printSummary(w io.Writer, s *Summary, asJSON bool) error {
	if asJSON {
		b, err := json.Marshal(s)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(w, string(b))
		return err
	}
	fmt.Fprintf(w, "events %d · proposals %d %v · committed %d · rejected %v · dead letters %d · tokens %d · cost $%.6f · cache hits %d · input rail blocked %d\n",
		s.Events, s.Proposals, s.ProposalsByKind, s.Committed, s.Rejected, s.DeadLetters, s.Tokens, s.CostUSD, s.CacheHits, s.InputRailBlocked)
	return nil
}

// isLoopback reports whether host (an IP address or a name) can be reached from this machine
// only.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
