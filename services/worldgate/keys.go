package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/worldgate/worldgate/services/gate/gates"
	"github.com/worldgate/worldgate/shared/attest"
)

func init() {
	commands["keys"] = command{"generate (or -rotate) the gates' Ed25519 signing keys in a directory (docs/attestation.md); `keys edge create|list|revoke`: edge's API keys", runKeys}
}

// runKeys writes <dir>/<gate>.key (0600) and <gate>.pub for each named gate (keeping keys that
// exist, so it may run at every start of a deployment; with -share one key for the gates of
// one process), and with -public-dir copies the public keys alone to a second directory. With -rotate the
// gate's key is replaced and its old public key kept as <gate>.<old key id>.pub, so proposals
// it signed still verify until they have drained; delete that file afterwards.
func runKeys(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "edge" {
		return runKeysEdge(ctx, args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("keys", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "directory of the keys (created 0700); required")
	gateList := fs.String("gate", "all", "gates: comma-separated names or all")
	rotate := fs.Bool("rotate", false, "replace the named gates' keys, keeping the old public keys beside the new ones")
	share := fs.Bool("share", false, "the named gates run in one process (gate -gate all, or a list): the ones without a key (all of them with -rotate) get one key between them, so the process signs each run of its gates once (docs/attestation.md); never share a key between processes")
	publicDir := fs.String("public-dir", "", "also make this directory hold exactly the public keys (the event-processor's -attest-keys); never the private keys' directory")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *dir == "" {
		fmt.Fprintln(stderr, "keys: -dir is required")
		return exitError{2}
	}
	names, err := gates.Builtin().Names(strings.Split(*gateList, ","))
	if err != nil {
		return err
	}
	groups := [][]string{names}
	if !*share {
		groups = nil
		for _, g := range names {
			groups = append(groups, []string{g})
		}
	}
	for _, group := range groups {
		signers, err := attest.GenerateShared(*dir, group, *rotate)
		if err != nil {
			return err
		}
		for _, g := range group {
			fmt.Fprintf(stdout, "%-10s key %s\n", g, signers[g].KeyID())
		}
	}
	if *publicDir != "" {
		names, err := attest.ExportPublic(*dir, *publicDir)
		if err != nil {
			return fmt.Errorf("public keys: %w", err)
		}
		fmt.Fprintf(stdout, "%d public keys in %s\n", len(names), *publicDir)
	}
	return nil
}
