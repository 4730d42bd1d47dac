package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gofrs/flock"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/edge/edge"
)

// runKeysEdge is `worldgate keys edge create|list|revoke`: it edits the keys file edge reads
// (-keys-file, WORLDGATE_KEYS_FILE). The file stores only each secret's SHA-256; create
// prints the secret once. Edits hold a lock beside the file and replace it atomically.
func runKeysEdge(_ context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || !slices.Contains([]string{"create", "list", "revoke"}, args[0]) {
		fmt.Fprintln(stderr, "usage: worldgate keys edge create|list|revoke -keys-file FILE [flags]  (edge's API keys; -h for each one's flags)")
		return exitError{2}
	}
	sub := args[0]
	fset := flag.NewFlagSet("keys edge "+sub, flag.ContinueOnError)
	fset.SetOutput(stderr)
	file := fset.String("keys-file", "", "edge's keys file (created 0600 if missing); required")
	var name, scopes, players *string
	var rateF *float64
	var burst *int
	if sub != "list" {
		name = fset.String("name", "", "the key's name, as logs and metrics show it; required")
	}
	if sub == "create" {
		scopes = fset.String("scopes", "", "comma-separated: publish, read:all, read:<actor id> (default with -players: publish and read:<each player>)")
		players = fset.String("players", "", "comma-separated player ids the key acts for only (e.g. player:ana): a key a browser or game client holds")
		rateF = fset.Float64("rate", 0, "requests per second (default 20)")
		burst = fset.Int("burst", 0, "burst (default 2×rate)")
	}
	if err := parseFlags(fset, args[1:]); err != nil {
		return err
	}
	if *file == "" {
		fmt.Fprintf(stderr, "keys edge %s: -keys-file is required (the file edge's -keys-file names)\n", sub)
		return exitError{2}
	}
	if name != nil && *name == "" {
		fmt.Fprintf(stderr, "keys edge %s: -name is required\n", sub)
		return exitError{2}
	}
	if sub == "list" {
		keys, err := readEdgeKeys(*file)
		if err != nil {
			return err
		}
		if len(keys) == 0 {
			fmt.Fprintf(stdout, "%s lists no keys\n", *file)
		}
		for _, k := range keys {
			line := fmt.Sprintf("%-20s scopes %s", k.Name, strings.Join(k.Scopes, ","))
			if len(k.Players) > 0 {
				line += " · players " + strings.Join(k.Players, ",")
			}
			if k.Rate > 0 {
				line += fmt.Sprintf(" · rate %g/s", k.Rate)
			}
			if k.SHA256 != "" {
				line += " · sha256 " + k.SHA256[:min(12, len(k.SHA256))] + "…"
			} else {
				line += " · plain-text secret (development only)"
			}
			fmt.Fprintln(stdout, line)
		}
		return nil
	}
	var said bytes.Buffer // printed once the file is written: a secret is never shown for a key not stored
	err := editEdgeKeys(*file, func(keys []edge.Key) ([]edge.Key, error) {
		i := slices.IndexFunc(keys, func(k edge.Key) bool { return k.Name == *name })
		if sub == "revoke" {
			if i < 0 {
				return nil, fmt.Errorf("%s has no key named %q (worldgate keys edge list shows them)", *file, *name)
			}
			keys = slices.Delete(keys, i, i+1)
			fmt.Fprintf(&said, "revoked %q in %s; edge reads its keys at start: restart it for the revocation to apply\n", *name, *file)
			if len(keys) == 0 {
				fmt.Fprintln(&said, "no keys are left: edge refuses to start until one is created")
			}
			return keys, nil
		}
		if i >= 0 {
			return nil, fmt.Errorf("%s already has a key named %q: revoke it first, or choose another name", *file, *name)
		}
		secret := newEdgeSecret()
		k := edge.Key{Name: *name, SHA256: edge.HashSecret(secret), Players: splitList(*players), Rate: *rateF, Burst: *burst}
		k.Scopes = splitList(*scopes)
		if len(k.Scopes) == 0 && len(k.Players) > 0 {
			k.Scopes = edge.PlayerKey(k.Name, "", k.Players...).Scopes
		}
		keys = append(keys, k)
		if _, err := edge.NewKeyring(keys); err != nil { // the same checks edge makes at start
			return nil, err
		}
		fmt.Fprintf(&said, "created %q in %s (scopes %s); its secret, shown only now (the file keeps its SHA-256):\n%s\n",
			k.Name, *file, strings.Join(k.Scopes, ","), secret)
		fmt.Fprintln(&said, "clients send it as Authorization: Bearer <secret>; edge reads its keys at start: restart it to accept this one")
		return keys, nil
	})
	if err != nil {
		return err
	}
	_, err = stdout.Write(said.Bytes())
	return err
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// newEdgeSecret is a random API key secret: 32 bytes, base64url, prefixed so it is
// recognisable in a leak scan.
func newEdgeSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return "wgk_" + base64.RawURLEncoding.EncodeToString(b)
}

type edgeKeysFile struct {
	Keys []edge.Key `json:"keys"`
}

// readEdgeKeys reads a keys file as edge does (unknown fields and duplicate members refused);
// a missing file, or one that lists no keys, has none.
func readEdgeKeys(path string) ([]edge.Key, error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if err := events.CheckJSON("keys file", raw); err != nil {
		return nil, fmt.Errorf("keys file %s: %w", path, err)
	}
	var f edgeKeysFile
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("keys file %s: %w", path, err)
	}
	return f.Keys, nil
}

// editEdgeKeys applies edit to the keys file under a lock and replaces the file atomically
// (written 0600 beside it, synced, renamed over it); on an error the file is unchanged.
func editEdgeKeys(path string, edit func([]edge.Key) ([]edge.Key, error)) (err error) {
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
	}
	lock := flock.New(path + ".lock")
	if err := lock.Lock(); err != nil {
		return fmt.Errorf("lock %s: %w", path, err)
	}
	defer func() {
		if uerr := lock.Unlock(); uerr != nil && err == nil {
			err = fmt.Errorf("unlock %s: %w", path, uerr)
		}
	}()
	keys, err := readEdgeKeys(path)
	if err != nil {
		return err
	}
	keys, err = edit(keys)
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(edgeKeysFile{Keys: keys}, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // gone after the rename
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
