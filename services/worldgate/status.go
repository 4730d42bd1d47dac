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
	url := fs.String("nats-url", "nats://127.0.0.1:4222", "NATS server URL")
	user := fs.String("nats-user", "", "NATS user")
	password := fs.String("nats-password", "", "NATS password")
	wait := fs.Duration("wait", time.Second, "how long to collect answers")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := config.Parse(fs, args, config.Prefix); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return exitError{2}
	}
	// Services answer discovery only into the inboxes of the operator and admin users.
	nc, err := nats.Connect(*url, nats.UserInfo(*user, *password), nats.CustomInboxPrefix(natsx.InboxPrefix(*user)), nats.Timeout(3*time.Second))
	if err != nil {
		return fmt.Errorf("connect to NATS at %s: %w", *url, err)
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
		fmt.Fprintln(stdout, "no Worldgate services answered on", *url)
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVICE\tVERSION\tID\tUP\tSTATS")
	for _, s := range all {
		data := ""
		if len(s.Endpoints) > 0 {
			data = string(s.Endpoints[0].Data)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.Name, s.Version, s.ID, time.Since(s.Started).Round(time.Second), data)
	}
	return tw.Flush()
}
