package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/worldgate/worldgate/events/route"
	"github.com/worldgate/worldgate/services/gate/gates"
	"github.com/worldgate/worldgate/services/worldgate/policy"
	"github.com/worldgate/worldgate/services/worldgate/programs"
	"github.com/worldgate/worldgate/shared/attest"
	"github.com/worldgate/worldgate/shared/natsx/natsauth"
)

// The deployment files that follow from the gate registry and the NATS users, written by
// deploy-manifests beside the services' manifests: a new gate or NATS user is never added to
// them by hand.

// natsPasswordsMarker is the line of the hand-written compose template that the NATS servers'
// password variables, one per user of the NATS configuration, replace.
const natsPasswordsMarker = "    # @nats-passwords: generated from the NATS users (services/worldgate/policy)\n"

// natsUsers are the users of the NATS configuration `nats-config -approvers approvers` writes
// (deploy/nats/auth.conf), in its order.
func natsUsers(approvers []string) ([]string, error) {
	reg := gates.Builtin()
	routes, err := route.Load("", reg.Known()...)
	if err != nil {
		return nil, err
	}
	rs, err := policy.Roles(reg, routes, approvers...)
	if err != nil {
		return nil, err
	}
	var users []string
	for _, r := range rs {
		users = append(users, r.Name)
	}
	return users, nil
}

// devPassword is a NATS user's development password (compose's .env, the dev overlay): public.
func devPassword(user string) string { return user + "-dev-password" }

// composeNATSPasswords fills the compose file's password marker: the NATS servers read every
// user's password from the environment (auth.conf's $WORLDGATE_NATS_<USER>_PASSWORD).
func composeNATSPasswords(compose, name string, users []string) (string, error) {
	if strings.Count(compose, natsPasswordsMarker) != 1 {
		return "", fmt.Errorf("%s has no line %q, or several", name, strings.TrimSpace(natsPasswordsMarker))
	}
	var b strings.Builder
	for _, u := range users {
		v := natsauth.PasswordEnv(u)
		fmt.Fprintf(&b, "    %s: ${%s}\n", v, v)
	}
	return strings.Replace(compose, natsPasswordsMarker, b.String(), 1), nil
}

// region replaces the lines between a file's "# @begin name" and "# @end name" lines (each
// found once, the rest of those lines free) with body.
func region(text, file, name, body string) (string, error) {
	begin, end := "# @begin "+name, "# @end "+name
	lines := strings.SplitAfter(text, "\n")
	b, e := -1, -1
	for i, l := range lines {
		switch {
		case strings.Contains(l, begin):
			if b >= 0 {
				return "", fmt.Errorf("%s has two lines %q", file, begin)
			}
			b = i
		case strings.Contains(l, end):
			if e >= 0 {
				return "", fmt.Errorf("%s has two lines %q", file, end)
			}
			e = i
		}
	}
	if b < 0 || e < b {
		return "", fmt.Errorf("%s has no line %q followed by a line %q", file, begin, end)
	}
	return strings.Join(lines[:b+1], "") + body + strings.Join(lines[e:], ""), nil
}

// dotEnv is compose's .env with every NATS user's development password.
func dotEnv(env, file string, users []string) (string, error) {
	var b strings.Builder
	for _, u := range users {
		fmt.Fprintf(&b, "%s=%s\n", natsauth.PasswordEnv(u), devPassword(u))
	}
	return region(env, file, "nats-passwords", b.String())
}

// k8sNATSUsers are the NATS users the Kubernetes base refers to in Secret worldgate-nats: the
// provision Job's admin, each gate's user and each deployed service's, in users' order.
func k8sNATSUsers(users []string, specs []gates.Spec, progs []programs.Program) []string {
	want := map[string]bool{"admin": true}
	for _, s := range specs {
		want[natsauth.GateRole(s.Name)] = true
	}
	for _, p := range progs {
		if p.Deploy != nil && p.Deploy.K8s != nil {
			want[p.Deploy.NATSUser] = true
		}
	}
	return slices.DeleteFunc(slices.Clone(users), func(u string) bool { return !want[u] })
}

// devOverlay is the dev overlay's kustomization with its generated Secrets: worldgate-nats's
// development passwords, each gate's signing key Secret and worldgate-attest-keys.
func devOverlay(kust, file string, users []string, specs []gates.Spec) (string, error) {
	var b strings.Builder
	for _, u := range users {
		fmt.Fprintf(&b, "      - %s=%s\n", u, devPassword(u))
	}
	kust, err := region(kust, file, "nats-passwords", b.String())
	if err != nil {
		return "", err
	}
	b.Reset()
	for _, s := range specs {
		fmt.Fprintf(&b, "  - name: worldgate-gate-%s-key\n    files:\n      - keys/%s.key\n", s.Name, s.Name)
	}
	b.WriteString("  - name: worldgate-attest-keys\n    files:\n")
	for _, s := range specs {
		fmt.Fprintf(&b, "      - attest-keys/%s.pub\n", s.Name)
	}
	return region(kust, file, "gate-keys", b.String())
}

// devGateKeys gives each gate without one a development key pair in the dev overlay:
// keys/<gate>.key and attest-keys/<gate>.pub (public, like every value of that overlay). It
// never replaces a key that is there.
func devGateKeys(dir string, specs []gates.Spec) ([]string, error) {
	var wrote []string
	for _, s := range specs {
		key := filepath.Join(dir, "keys", s.Name+".key")
		if _, err := os.Stat(key); err == nil {
			continue
		}
		files, err := devKeyPair(s.Name, key, filepath.Join(dir, "attest-keys", s.Name+".pub"))
		if err != nil {
			return nil, err
		}
		wrote = append(wrote, files...)
	}
	return wrote, nil
}

// devKeyPair writes a new key pair of gate: its private key to key, its public key to pub.
func devKeyPair(gate, key, pub string) ([]string, error) {
	tmp, err := os.MkdirTemp("", "worldgate-keys-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	if _, err := attest.Generate(tmp, gate, false); err != nil {
		return nil, err
	}
	var wrote []string
	for _, f := range []struct{ from, to string }{{gate + ".key", key}, {gate + ".pub", pub}} {
		data, err := os.ReadFile(filepath.Join(tmp, f.from))
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(f.to, data, 0o644); err != nil {
			return nil, err
		}
		wrote = append(wrote, f.to)
	}
	return wrote, nil
}

// prodPDBs is the prod overlay's pdb.yaml: a PodDisruptionBudget for each gate's Deployment and
// each deployed service's.
func prodPDBs(specs []gates.Spec, progs []programs.Program) string {
	var b strings.Builder
	b.WriteString("# Generated by `worldgate deploy-manifests` from the gate registry (services/gate/gates) and the\n" +
		"# list of programs (services/worldgate/programs); do not edit. Regenerate with\n" +
		"# `go generate ./services/worldgate/policy`.\n" +
		"# A voluntary disruption (a node drain, an upgrade) takes at most one pod of each Deployment\n" +
		"# at a time; with two replicas or more, every worker keeps consuming meanwhile.\n")
	var names []string
	for _, s := range specs {
		names = append(names, natsauth.GateRole(s.Name))
	}
	for _, p := range progs {
		if p.Deploy != nil && p.Deploy.K8s != nil {
			names = append(names, p.Name)
		}
	}
	for _, n := range names {
		fmt.Fprintf(&b, "---\napiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata:\n  name: %s\nspec:\n  maxUnavailable: 1\n"+
			"  selector:\n    matchLabels:\n      app.kubernetes.io/name: %s\n", n, n)
	}
	return b.String()
}
