// Command mcp-classify serves Worldgate's read-only classification tools
// (classify-intent, moderate-content) over Streamable HTTP (at /mcp, bearer
// token with scope classify:read) or stdio (trusted local use, no token).
//
//	mcp-classify -listen :7403 -admin :9403 -token-file tokens.json
//	mcp-classify -transport stdio
//	WORLDGATE_MCP_JWT_SECRET=... mcp-classify issue-token -subject ai-worker -scopes classify:read
package main

import (
	"context"
	"flag"
	"fmt"
	"github.com/worldgate/worldgate/shared/config"
	"github.com/worldgate/worldgate/shared/metrics"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/worldgate/worldgate/services/mcp-classify/classifytools"
	"github.com/worldgate/worldgate/shared/gctune"
	"github.com/worldgate/worldgate/shared/mcpx"
	"github.com/worldgate/worldgate/shared/natsx"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "mcp-classify:", err)
		os.Exit(1)
	}
}

func run() error {
	if len(os.Args) > 1 && os.Args[1] == "issue-token" {
		return mcpx.IssueTokenCommand(os.Args[2:], os.Stdout)
	}
	var f mcpx.CommonFlags
	fs := flag.NewFlagSet("mcp-classify", flag.ExitOnError)
	f.Register(fs, "127.0.0.1:7403", "127.0.0.1:9403")
	policyVersion := fs.String("policy-version", "", "moderation policy version to serve (empty: the newest embedded one)")
	var openaiCfg, guardCfg classifytools.ModelConfig
	fs.StringVar(&openaiCfg.APIKey, "moderation-openai-key", "", "OpenAI API key: when set, moderate-content also asks OpenAI's moderation endpoint and combines its verdict with the rules")
	fs.StringVar(&openaiCfg.BaseURL, "moderation-openai-url", "https://api.openai.com/v1", "OpenAI API base URL for the moderation endpoint")
	fs.StringVar(&openaiCfg.Model, "moderation-openai-model", "omni-moderation-latest", "OpenAI moderation model")
	fs.StringVar(&guardCfg.BaseURL, "moderation-guard-url", "", "base URL of an OpenAI-compatible chat server running a Llama-Guard-style classifier (e.g. http://localhost:11434/v1); when set, moderate-content combines its verdict with the rules")
	fs.StringVar(&guardCfg.Model, "moderation-guard-model", "llama-guard3", "the guard classifier's model name")
	fs.StringVar(&guardCfg.APIKey, "moderation-guard-key", "", "API key for the guard server, if it needs one")
	modTimeout := fs.Duration("moderation-model-timeout", 5*time.Second, "timeout of one model-backed moderation request")
	// NATS only registers the server with service discovery (worldgate status).
	ncfg := natsx.ConnConfig{Name: "mcp-classify", User: "mcp-classify"}
	ncfg.RegisterFlags(fs, "mcp-classify", true)
	if err := config.Parse(fs, os.Args[1:], mcpx.EnvPrefix); err != nil {
		return err
	}
	logger := f.Logger(os.Stderr, "mcp-classify")
	gctune.Apply(gctune.ShortLived, logger)
	var nc *nats.Conn
	if ncfg.URL != "" {
		c, _, err := natsx.Connect(ncfg, logger)
		if err != nil {
			return err
		}
		defer func() {
			if err := c.Drain(); err != nil {
				logger.Warn("NATS drain at stop", "err", err)
			}
		}()
		nc = c
	}
	reg := metrics.NewRegistry()
	common, err := f.ServerOptions(logger, reg)
	if err != nil {
		return err
	}
	rules, err := classifytools.EmbeddedPolicy(*policyVersion)
	if err != nil {
		return err
	}
	var moderator classifytools.Moderator = rules
	var models []classifytools.Moderator
	if openaiCfg.APIKey != "" {
		openaiCfg.Timeout = *modTimeout
		models = append(models, classifytools.NewOpenAIModerator(openaiCfg))
	}
	if guardCfg.BaseURL != "" {
		guardCfg.Timeout = *modTimeout
		models = append(models, classifytools.NewGuardModerator(guardCfg))
	}
	if len(models) > 0 {
		moderator = &classifytools.Combined{Rules: rules, Models: models, Logger: logger}
	}
	logger.Info("moderation", "policy", moderator.Version())
	srv, err := classifytools.New(classifytools.Options{Moderator: moderator, Options: common})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mcpx.Mount(mux, "/mcp", srv.Handler(), common.Auth, mcpx.ScopeClassifyRead)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return mcpx.Run(ctx, mcpx.RunOptions{Flags: &f, Service: "mcp-classify", Logger: logger, Server: srv.MCP(), Handler: mux, Gatherer: reg, NATS: nc})
}
