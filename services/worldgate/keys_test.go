package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/worldgate/worldgate/shared/attest"
)

// `worldgate keys` writes a key pair per gate, private keys 0600; -rotate replaces a key and
// keeps the old public key, so the keyring accepts both.
func TestKeysGeneratesAndRotates(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	var out bytes.Buffer
	if err := runKeys(context.Background(), []string{"-dir", dir}, &out, &out); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), " key "); n != 8 {
		t.Fatalf("%d keys written:\n%s", n, out.String())
	}
	if fi, err := os.Stat(filepath.Join(dir, "approval.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("approval.key: %v %v", fi.Mode().Perm(), err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("key directory mode %v %v", fi.Mode().Perm(), err)
	}
	out.Reset()
	if err := runKeys(context.Background(), []string{"-dir", dir, "-gate", "safety", "-rotate"}, &out, &out); err != nil {
		t.Fatal(err)
	}
	ring, err := attest.LoadKeyring(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ring.KeyIDs("safety")) != 2 || len(ring.KeyIDs("schema")) != 1 {
		t.Fatalf("after rotating safety: safety %v, schema %v", ring.KeyIDs("safety"), ring.KeyIDs("schema"))
	}
	if err := runKeys(context.Background(), []string{"-dir", dir, "-gate", "nope"}, &out, &out); err == nil {
		t.Fatal("an unknown gate was accepted")
	}
	// Run again at a deployment's next start with -public-dir: the keys stay, and the public
	// directory gets the 8 public keys plus safety's old one, and no private key.
	pub := filepath.Join(t.TempDir(), "attest-keys")
	out.Reset()
	if err := runKeys(context.Background(), []string{"-dir", dir, "-public-dir", pub}, &out, &out); err != nil {
		t.Fatal(err)
	}
	if again, _ := attest.LoadKeyring(dir); len(again.KeyIDs("schema")) != 1 || again.KeyIDs("schema")[0] != ring.KeyIDs("schema")[0] {
		t.Fatal("running keys again replaced a key")
	}
	files, _ := filepath.Glob(filepath.Join(pub, "*"))
	if len(files) != 9 || !strings.Contains(out.String(), "9 public keys") {
		t.Fatalf("public directory holds %v\n%s", files, out.String())
	}
	for _, f := range files {
		if !strings.HasSuffix(f, ".pub") {
			t.Errorf("%s in the public key directory", f)
		}
	}
}

// `worldgate keys -share` gives the gates of one process one key: every gate's keyring entry
// is that key, so a fused run is signed once.
func TestKeysShareOneKeyForAProcess(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	var out bytes.Buffer
	if err := runKeys(context.Background(), []string{"-dir", dir, "-share"}, &out, &out); err != nil {
		t.Fatal(err)
	}
	ring, err := attest.LoadKeyring(dir)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, g := range ring.Gates() {
		for _, id := range ring.KeyIDs(g) {
			ids[id] = true
		}
	}
	if len(ring.Gates()) != 8 || len(ids) != 1 {
		t.Fatalf("%d gates with %d distinct keys; want 8 gates sharing one:\n%s", len(ring.Gates()), len(ids), out.String())
	}
}
