package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/worldgate/worldgate/events/route"
	"github.com/worldgate/worldgate/services/gate/gates"
	"github.com/worldgate/worldgate/services/worldgate/policy"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/natsx"
	"github.com/worldgate/worldgate/shared/natsx/natsauth"
)

func init() {
	commands["nats-config"] = command{"write the NATS server configuration with one user per role (deploy/nats)", runNATSConfig}
	commands["provision"] = command{"create or update the JetStream streams and buckets (as the admin user)", runProvision}
}

func runNATSConfig(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("nats-config", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "deploy/nats", "directory for "+natsauth.ServerConfFile+" and "+natsauth.AuthConfFile)
	doc := fs.String("doc", "", "also write the table of roles and permissions here (e.g. docs/nats-permissions.md)")
	routesFile := fs.String("routes", "", "routes file (YAML) the gates run with; empty: the embedded default")
	approvers := fs.String("approvers", "", "comma-separated names of the people who may approve held proposals: a user approver-<name> each (deploy/nats has the example approver "+policy.ExampleApprover+")")
	gateSets := fs.String("gate-sets", "", `extra users for processes running several gates, e.g. "schema,safety;dedup,rate" (users gates-schema-safety, gates-dedup-rate)`)
	unfusedSets := fs.String("unfused-gate-sets", "", `extra users for processes running several gates with fusion off (gate -fuse=false), e.g. "schema,safety;all" (users gates-schema-safety-unfused, gates-unfused)`)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	reg := gates.Builtin()
	routes, err := route.Load(*routesFile, reg.Known()...)
	if err != nil {
		return err
	}
	var names []string
	for _, a := range strings.Split(*approvers, ",") {
		if a = strings.TrimSpace(a); a != "" {
			names = append(names, a)
		}
	}
	rs, err := policy.Roles(reg, routes, names...)
	if err != nil {
		return fmt.Errorf("-approvers: %w", err)
	}
	for _, sets := range []struct {
		flag, value string
		noFusion    bool
	}{{"-gate-sets", *gateSets, false}, {"-unfused-gate-sets", *unfusedSets, true}} {
		for _, set := range strings.Split(sets.value, ";") {
			if set = strings.TrimSpace(set); set == "" {
				continue
			}
			gs := strings.Split(set, ",")
			for i := range gs {
				gs[i] = strings.TrimSpace(gs[i])
			}
			proc := gates.Process{Gates: gs, NoFusion: sets.noFusion}
			if (len(gs) == 1 && gs[0] == "all") || slices.Equal(gs, reg.Known()) { // every gate: user gates(-unfused)
				proc = reg.OneProcess()[0]
				proc.NoFusion = sets.noFusion
			}
			r, err := policy.GateProcess(reg, routes, proc)
			if err != nil {
				return fmt.Errorf("%s: %w", sets.flag, err)
			}
			if slices.ContainsFunc(rs, func(have natsauth.Role) bool { return have.Name == r.Name }) {
				continue // the gates user, or a set named twice
			}
			rs = append(rs, r)
		}
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	files := map[string]string{
		filepath.Join(*out, natsauth.ServerConfFile): natsauth.RenderServer(),
		filepath.Join(*out, natsauth.AuthConfFile):   natsauth.RenderAuth(rs),
	}
	if *doc != "" {
		files[*doc] = natsauth.RenderDoc(rs)
	}
	for _, path := range sortedKeys(files) {
		if err := os.WriteFile(path, []byte(files[path]), 0o644); err != nil {
			return err
		}
		fmt.Fprintln(stdout, "wrote", path)
	}
	return nil
}

func runProvision(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("provision", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var n natsFlags
	n.register(fs)
	var topology natsx.TopologyOptions
	topology.RegisterFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	log := logx.New(stderr, "worldgate-provision", "info")
	nc, js, err := natsx.Connect(n.as("worldgate-provision"), log)
	if err != nil {
		return err
	}
	defer nc.Close()
	// A cluster that cannot answer yet (started a moment ago, electing its leaders) is waited for.
	if err := (natsx.Provisioning{Provision: true, Topology: topology}).AtStart(ctx, js, log); err != nil {
		return fmt.Errorf("%w (provisioning needs the %s user)", err, natsauth.Admin)
	}
	fmt.Fprintln(stdout, "topology provisioned")
	return nil
}
