package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/worldgate/worldgate/services/ai-worker/templates"
	"github.com/worldgate/worldgate/services/gate/approval"
	"github.com/worldgate/worldgate/services/worldgate/worldfile"
	"github.com/worldgate/worldgate/shared/config"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/natsx"
)

func init() {
	commands["world"] = command{"world load -f FILE: send a world file through the pipeline as proposals", runWorld}
	commands["proposals"] = command{"proposals list|show ID|approve ID|reject ID -reason TEXT: decide held proposals", runProposals}
	commands["templates"] = command{"list the versioned prompt templates with their SHA-256", runTemplates}
}

// natsFlags are the connection flags every client command shares: the NATS flag set every
// program uses (natsx.ConnConfig.RegisterFlags).
type natsFlags struct{ natsx.ConnConfig }

func (n *natsFlags) register(fs *flag.FlagSet) {
	n.RegisterFlags(fs, "operator; publisher for publish", false)
}

// as is the connection configuration under client name.
func (n natsFlags) as(name string) natsx.ConnConfig {
	c := n.ConnConfig
	c.Name = name
	return c
}

// parseWithID parses a command's flags and the one id it takes, before or after the flags
// ("" when none is given).
func parseWithID(fs *flag.FlagSet, args []string) (string, error) {
	var id string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		id, args = args[0], args[1:]
	}
	if err := parseFlags(fs, args); err != nil {
		return "", err
	}
	if id == "" && fs.NArg() > 0 {
		id = fs.Arg(0)
	}
	return id, nil
}

func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := config.Parse(fs, args, config.Prefix); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitError{0}
		}
		return exitError{2}
	}
	return nil
}

func runWorld(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "load" {
		return errors.New("usage: worldgate world load -f FILE [-validate-only]")
	}
	fs := flag.NewFlagSet("world load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var n natsFlags
	n.register(fs)
	file := fs.String("f", "", "world file (YAML)")
	validateOnly := fs.Bool("validate-only", false, "check the file; needs no server")
	wait := fs.Duration("wait", 0, "wait up to this long until every proposal of the world is committed or refused, and name each refused one (0: return once they are sent)")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if *file == "" {
		return errors.New("-f FILE is required")
	}
	data, err := os.ReadFile(*file)
	if err != nil {
		return err
	}
	w, err := worldfile.Parse(*file, data)
	if err != nil {
		return err
	}
	if *validateOnly {
		fmt.Fprintf(stdout, "%s is valid\n", *file)
		return nil
	}
	nc, js, err := natsx.Connect(n.as("worldgate-world-load"), logx.Discard())
	if err != nil {
		return err
	}
	defer nc.Close()
	count, err := publishWorld(ctx, js, w)
	if err != nil {
		return fmt.Errorf("after %d proposals: %w", count, err)
	}
	fmt.Fprintf(stdout, "sent %d proposals from %s through the pipeline (loading the same file again changes nothing)\n", count, *file)
	if *wait > 0 {
		return waitWorld(ctx, js, w, *wait, stdout)
	}
	return nil
}

func runProposals(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: worldgate proposals list|show ID|approve ID|reject ID -reason TEXT")
	}
	verb, rest := args[0], args[1:]
	fs := flag.NewFlagSet("proposals "+verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var n natsFlags
	n.register(fs)
	reason := fs.String("reason", "", "why the proposal is rejected (reject)")
	by := fs.String("by", currentUser(), "who decides (approve, reject), on a NATS server without users only: otherwise the approver is the person whose approver-<name> credentials connect")
	all := fs.Bool("all", false, "list decided proposals too (list)")
	asJSON := fs.Bool("json", false, "print JSON")
	id, err := parseWithID(fs, rest)
	if err != nil {
		return err
	}
	if verb != "list" && id == "" {
		return fmt.Errorf("proposals %s needs a proposal id", verb)
	}
	nc, js, err := natsx.Connect(n.as("worldgate-proposals"), logx.Discard())
	if err != nil {
		return err
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	store, err := approval.Open(ctx, js)
	if err != nil {
		return err
	}
	var rec approval.Record
	switch verb {
	case "list":
		var statuses []approval.Status
		if !*all {
			statuses = []approval.Status{approval.StatusPending}
		}
		l, err := store.Scan(ctx, statuses...)
		if err != nil {
			return err
		}
		// A record that cannot be read is named, with its sequence and why, and the rest are
		// listed: one bad entry must not hide the proposals waiting for a decision.
		if *asJSON {
			for _, u := range l.Unreadable {
				fmt.Fprintln(stderr, u)
			}
			return json.NewEncoder(stdout).Encode(l.Records)
		}
		for _, u := range l.Unreadable {
			fmt.Fprintln(stdout, u)
		}
		if len(l.Records) == 0 {
			fmt.Fprintln(stdout, "no proposals waiting for a decision")
			return nil
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "PROPOSAL\tKIND\tSTATUS\tHELD\tCORRELATION")
		for _, r := range l.Records {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.ProposalID, r.Kind, r.Status, r.HeldUTC.Format(time.RFC3339), r.CorrelationID)
		}
		return tw.Flush()
	case "show":
		rec, err = store.Show(ctx, id)
	case "approve", "reject":
		if verb == "reject" && *reason == "" {
			return errors.New("proposals reject needs -reason: say why, it reaches the agent and the audit trail")
		}
		status := approval.StatusApproved
		if verb == "reject" {
			status = approval.StatusRejected
		}
		if err := store.Request(ctx, approval.Decision{ProposalID: id, Status: status, By: *by, Reason: *reason}); err != nil {
			return err
		}
		// The approval gate carries the decision out; wait for it, but not forever.
		if rec, err = store.Await(ctx, id); errors.Is(err, context.DeadlineExceeded) {
			fmt.Fprintf(stderr, "decision on %s sent; no approval gate has carried it out yet (it will once one runs)\n", id)
			err = nil
		}
		if err == nil && rec.Status != status && rec.Status != approval.StatusPending {
			err = fmt.Errorf("proposal %s was %s by %s before this decision arrived: %w", id, rec.Status, rec.DecidedBy, approval.ErrAlreadyDecided)
		}
	default:
		return fmt.Errorf("unknown proposals command %q: use list, show, approve or reject", verb)
	}
	if err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(rec)
}

func currentUser() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return "operator"
}

func runTemplates(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("templates", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print JSON, template texts included")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	list := templates.List()
	if *asJSON {
		return json.NewEncoder(stdout).Encode(list)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tVERSION\tKIND\tSHA-256\tDESCRIPTION")
	for _, t := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.ID, t.Version, t.Kind, t.SHA256, t.Description)
	}
	return tw.Flush()
}
