package stack

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/events/route"
	"github.com/worldgate/worldgate/services/gate/gates"
	"github.com/worldgate/worldgate/services/worldgate/policy"
	"github.com/worldgate/worldgate/shared/natsx"
	"github.com/worldgate/worldgate/shared/natsx/natsauth"
)

// natsUsers are the users the embedded server runs with: the roles of
// services/worldgate/policy, exactly as production configures them, and one approver user per
// name in approvers, with random passwords kept in <data-dir>/nats-users.json so that they
// survive restarts.
func natsUsers(dataDir string, approvers []string) (map[string]string, []natsx.User, error) {
	rs, err := policy.Roles(gates.Builtin(), route.Default(), approvers...)
	if err != nil {
		return nil, nil, err
	}
	path := filepath.Join(dataDir, "nats-users.json")
	passwords := map[string]string{}
	if b, err := os.ReadFile(path); err == nil {
		if err := json.Unmarshal(b, &passwords); err != nil {
			return nil, nil, fmt.Errorf("%s is not valid JSON (delete it to get new dev passwords): %w", path, err)
		}
	}
	changed := false
	for _, r := range rs {
		if passwords[r.Name] != "" {
			continue
		}
		b := make([]byte, 18)
		if _, err := rand.Read(b); err != nil {
			return nil, nil, err
		}
		passwords[r.Name] = base64.RawURLEncoding.EncodeToString(b)
		changed = true
	}
	if changed {
		b, err := json.MarshalIndent(passwords, "", "  ")
		if err != nil {
			return nil, nil, err
		}
		if err := os.WriteFile(path, append(b, '\n'), 0o600); err != nil {
			return nil, nil, err
		}
	}
	return passwords, natsauth.Users(rs, func(role string) string { return passwords[role] }), nil
}

// ConnectAs connects to the embedded server as role's user; the connection drains when the
// stack stops (after the workers).
func (st *Stack) ConnectAs(role string) (*nats.Conn, jetstream.JetStream, error) {
	nc, js, err := natsx.Connect(natsx.ConnConfig{URL: st.NATS.ClientURL(), Name: "worldgate-dev/" + role,
		User: role, Password: st.natsPasswords[role]}, st.Log)
	if err != nil {
		return nil, nil, err
	}
	st.OnStop(func() { _ = nc.Drain() })
	return nc, js, nil
}

// NATSCredentials is how endpoints.json names a NATS user.
func (st *Stack) NATSCredentials(role string) map[string]string {
	return map[string]string{"user": role, "password": st.natsPasswords[role]}
}
