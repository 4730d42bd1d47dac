package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/worldgate/worldgate/shared/config"
	"github.com/worldgate/worldgate/shared/natsx"
)

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var n natsFlags
	n.register(fs)
	wait := fs.Duration("wait", time.Second, "how long to collect answers")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := config.Parse(fs, args, config.Prefix); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return exitError{2}
	}
	// Services answer discovery only into the inboxes of the operator and admin users.
	nc, err := nats.Connect(n.URL, nats.UserInfo(n.User, n.Password), nats.CustomInboxPrefix(natsx.InboxPrefix(n.User)), nats.Timeout(3*time.Second), credentials(n.Creds))
	if err != nil {
		return fmt.Errorf("connect to NATS at %s: %w", n.URL, err)
	}
	defer nc.Close()
	// NATS service discovery: every service answers $SRV.STATS with its endpoints' statistics.
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return err
	}
	if err := nc.PublishRequest("$SRV.STATS", inbox, nil); err != nil {
		return err
	}
	type stats struct {
		Name      string    `json:"name"`
		ID        string    `json:"id"`
		Version   string    `json:"version"`
		Started   time.Time `json:"started"`
		Endpoints []struct {
			Name     string          `json:"name"`
			Requests int             `json:"num_requests"`
			Data     json.RawMessage `json:"data"`
		} `json:"endpoints"`
	}
	var all []stats
	deadline := time.Now().Add(*wait)
	for {
		msg, err := sub.NextMsg(time.Until(deadline))
		if err != nil {
			break
		}
		var s stats
		if json.Unmarshal(msg.Data, &s) == nil && strings.HasPrefix(s.Name, "worldgate-") {
			all = append(all, s)
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Name < all[j].Name })
	if *asJSON {
		return json.NewEncoder(stdout).Encode(all)
	}
	if len(all) == 0 {
		fmt.Fprintln(stdout, "no Worldgate services answered on", n.URL)
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVICE\tVERSION\tID\tUP\tHEALTH\tSTATS")
	var llmHealth []string
	for _, s := range all {
		data, health := "", "-"
		if len(s.Endpoints) > 0 {
			var stats map[string]json.RawMessage
			raw := s.Endpoints[0].Data
			if json.Unmarshal(raw, &stats) == nil {
				if llm, ok := stats["llm"]; ok {
					llmHealth = append(llmHealth, llmHealthLines(s.Name, s.ID, llm)...)
					delete(stats, "llm")
				}
				// natsx.Service's convention: "ok", or why the service is not healthy.
				if h, ok := stats["health"]; ok {
					_ = json.Unmarshal(h, &health)
					delete(stats, "health")
				}
				raw, _ = json.Marshal(stats)
			}
			data = string(raw)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.Version, s.ID, time.Since(s.Started).Round(time.Second), health, data)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(llmHealth) > 0 {
		tw = tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "\nLLM TARGET\tCIRCUIT\tFAILURES\tINSTANCE\tLAST ERROR")
		for _, l := range llmHealth {
			fmt.Fprintln(tw, l)
		}
		return tw.Flush()
	}
	return nil
}

// llmHealthLines renders an ai-worker's LLM targets (llm.TargetHealth, reported through
// service discovery) as rows of the status table.
func llmHealthLines(service, id string, raw json.RawMessage) []string {
	var targets []struct {
		Target              string `json:"target"`
		State               string `json:"state"`
		ConsecutiveFailures uint32 `json:"consecutiveFailures"`
		LastError           string `json:"lastError"`
		LastErrorKind       string `json:"lastErrorKind"`
	}
	if json.Unmarshal(raw, &targets) != nil {
		return nil
	}
	var out []string
	for _, t := range targets {
		last := t.LastErrorKind
		if t.LastError != "" {
			msg := t.LastError
			if len(msg) > 80 {
				msg = msg[:80] + "…"
			}
			last = msg
		}
		out = append(out, fmt.Sprintf("%s\t%s\t%d\t%s %s\t%s", t.Target, t.State, t.ConsecutiveFailures, strings.TrimPrefix(service, "worldgate-"), id, last))
	}
	return out
}

// credentials is the .creds file option, or none.
func credentials(path string) nats.Option {
	if path == "" {
		return func(*nats.Options) error { return nil }
	}
	return nats.UserCredentials(path)
}
