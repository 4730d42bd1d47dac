package attest

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
)

// Key files. A gate's private key is <dir>/<gate>.key (PKCS #8, PEM, mode 0600); the public
// keys the event-processor accepts are the PEM "PUBLIC KEY" blocks (PKIX) of every
// <dir>/<gate>.pub and <dir>/<gate>.<anything>.pub file: during a rotation the old key's file
// stays beside the new one until the proposals it signed have drained (docs/attestation.md).
const (
	privateSuffix = ".key"
	publicSuffix  = ".pub"
)

func marshalPublic(pub ed25519.PublicKey) ([]byte, error) { return x509.MarshalPKIXPublicKey(pub) }

// Generate writes a new key pair for gate into dir: <gate>.key (0600) and <gate>.pub. An
// existing private key is kept unless replace is true; with replace, the old public key is
// kept as <gate>.<old key id>.pub so hops it signed still verify (rotation).
func Generate(dir, gate string, replace bool) (*Signer, error) {
	signers, err := GenerateShared(dir, []string{gate}, replace)
	if err != nil {
		return nil, err
	}
	return signers[gate], nil
}

// GenerateShared is Generate for gates that run in one process: the gates without a key (all
// of them with replace) get one new key pair between them, written as each one's, so that the
// process signs a run of its gates once (RunVersion). Share a key only within a process: a
// process holding it can sign for every gate it is the key of.
func GenerateShared(dir string, gates []string, replace bool) (map[string]*Signer, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	signers := make(map[string]*Signer, len(gates))
	var missing []string
	for _, gate := range gates {
		old, err := LoadSigner(dir, gate)
		switch {
		case err == nil && !replace:
			signers[gate] = old
			continue
		case err == nil:
			oldPub := filepath.Join(dir, gate+publicSuffix)
			if err := os.Rename(oldPub, filepath.Join(dir, gate+"."+old.KeyID()+publicSuffix)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, err
			}
		case !errors.Is(err, fs.ErrNotExist):
			return nil, err
		}
		missing = append(missing, gate)
	}
	if len(missing) == 0 {
		return signers, nil
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, err
	}
	pubDER, err := marshalPublic(pub)
	if err != nil {
		return nil, err
	}
	for _, gate := range missing {
		if err := writeFile(filepath.Join(dir, gate+publicSuffix), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o600); err != nil {
			return nil, err
		}
		if err := writeFile(filepath.Join(dir, gate+privateSuffix), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
			return nil, err
		}
		if signers[gate], err = NewSigner(gate, priv); err != nil {
			return nil, err
		}
	}
	return signers, nil
}

func writeFile(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// LoadSigner reads gate's private key from dir. It refuses a key file others may read.
func LoadSigner(dir, gate string) (*Signer, error) {
	path := filepath.Join(dir, gate+privateSuffix)
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	// Owner read (0600/0400), or group read for a Kubernetes Secret volume, whose files are
	// root-owned and given to the pod's fsGroup (mode 0440). Nothing for others, no group write.
	if fi.Mode().Perm()&0o037 != 0 {
		return nil, fmt.Errorf("the %s gate's signing key %s is readable by others (mode %v): chmod 600 it", gate, path, fi.Mode().Perm())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("%s is not a PEM private key", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s is not an Ed25519 key", path)
	}
	return NewSigner(gate, priv)
}

// LoadKeyring reads every public key file of dir (see the file names above).
func LoadKeyring(dir string) (*Keyring, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("attestation keys: %w", err)
	}
	k := NewKeyring()
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, publicSuffix) {
			continue
		}
		gate, _, _ := strings.Cut(strings.TrimSuffix(name, publicSuffix), ".")
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		n := 0
		for {
			var block *pem.Block
			block, data = pem.Decode(data)
			if block == nil {
				break
			}
			if block.Type != "PUBLIC KEY" {
				continue
			}
			pk, err := x509.ParsePKIXPublicKey(block.Bytes)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			pub, ok := pk.(ed25519.PublicKey)
			if !ok {
				return nil, fmt.Errorf("%s holds a key that is not Ed25519", name)
			}
			k.Add(gate, pub)
			n++
		}
		if n == 0 {
			return nil, fmt.Errorf("%s holds no PEM public key", name)
		}
	}
	return k, nil
}

// Ensure makes sure dir holds a key pair for each of gates (generating the missing ones, as
// `worldgate dev` and the harnesses do) and returns their signers and the keyring of dir.
func Ensure(dir string, gates []string) (map[string]*Signer, *Keyring, error) {
	processes := make([][]string, len(gates))
	for i, g := range gates {
		processes[i] = []string{g}
	}
	return EnsureShared(dir, processes)
}

// EnsureShared is Ensure for gates grouped by the process they run in: the missing keys of a
// process's gates are one key (GenerateShared).
func EnsureShared(dir string, processes [][]string) (map[string]*Signer, *Keyring, error) {
	signers := map[string]*Signer{}
	for _, gates := range processes {
		ss, err := GenerateShared(dir, gates, false)
		if err != nil {
			return nil, nil, fmt.Errorf("signing keys of the %s gates: %w", strings.Join(gates, ", "), err)
		}
		maps.Copy(signers, ss)
	}
	ring, err := LoadKeyring(dir)
	if err != nil {
		return nil, nil, err
	}
	return signers, ring, nil
}

// LoadSigners reads the private keys of gates from dir.
func LoadSigners(dir string, gates []string) (map[string]*Signer, error) {
	signers := make(map[string]*Signer, len(gates))
	for _, g := range gates {
		s, err := LoadSigner(dir, g)
		if err != nil {
			return nil, fmt.Errorf("signing key of the %s gate: %w (generate it with `worldgate keys -dir %s -gate %s`)", g, err, dir, g)
		}
		signers[g] = s
	}
	return signers, nil
}

// ExportPublic makes out hold exactly the public key files of dir (every <gate>.pub and, during
// a rotation, <gate>.<id>.pub; never a private key): what the event-processor's -attest-keys
// directory should hold. Files of out that dir no longer has (an old key whose proposals
// drained) are removed. It returns the names written.
func ExportPublic(dir, out string) ([]string, error) {
	if filepath.Clean(dir) == filepath.Clean(out) {
		return nil, errors.New("the public key directory must not be the directory of the private keys")
	}
	if _, err := LoadKeyring(dir); err != nil { // only well-formed public keys leave dir
		return nil, err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	keep := map[string]bool{}
	var names []string
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), publicSuffix) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		if err := writeFile(filepath.Join(out, e.Name()), data, 0o644); err != nil {
			return nil, err
		}
		keep[e.Name()] = true
		names = append(names, e.Name())
	}
	old, err := os.ReadDir(out)
	if err != nil {
		return nil, err
	}
	for _, e := range old {
		if !e.IsDir() && strings.HasSuffix(e.Name(), publicSuffix) && !keep[e.Name()] {
			if err := os.Remove(filepath.Join(out, e.Name())); err != nil {
				return nil, err
			}
		}
	}
	return names, nil
}
