package policy_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/worldgate/worldgate/events/route"
	"github.com/worldgate/worldgate/services/gate/gates"
	"github.com/worldgate/worldgate/services/worldgate/policy"
	"github.com/worldgate/worldgate/shared/natsx/natsauth"
)

// The committed files are what the generator writes: they cannot drift from the code.
func TestCommittedConfigurationIsUpToDate(t *testing.T) {
	rs, err := policy.Roles(gates.Builtin(), route.Default(), policy.ExampleApprover)
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		"../../../deploy/nats/" + natsauth.AuthConfFile:   natsauth.RenderAuth(rs),
		"../../../deploy/nats/" + natsauth.ServerConfFile: natsauth.RenderServer(),
		"../../../docs/nats-permissions.md":               natsauth.RenderDoc(rs),
	} {
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Errorf("%s is not what the generator writes: run `go generate ./services/worldgate/policy` and commit the result", path)
		}
	}
}

// nats-server reads the generated configuration into exactly the users and permissions the
// embedded server runs with, passwords from the environment.
func TestGeneratedConfigurationLoadsIntoTheSameUsers(t *testing.T) {
	rs, err := policy.Roles(gates.Builtin(), route.Default(), policy.ExampleApprover)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, text := range map[string]string{natsauth.AuthConfFile: natsauth.RenderAuth(rs), natsauth.ServerConfFile: natsauth.RenderServer()} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	conf := filepath.Join(dir, natsauth.ServerConfFile)
	if _, err := server.ProcessConfigFile(conf); err == nil {
		t.Fatal("the configuration loaded without the password variables set")
	}
	for _, r := range rs {
		t.Setenv(natsauth.PasswordEnv(r.Name), "secret-"+r.Name)
	}
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	if len(opts.Users) != len(rs) {
		t.Fatalf("%d users in the configuration, %d roles", len(opts.Users), len(rs))
	}
	for i, r := range rs {
		u := opts.Users[i]
		if u.Username != r.Name || u.Password != "secret-"+r.Name {
			t.Errorf("user %d is %s with password %q; want %s", i, u.Username, u.Password, r.Name)
			continue
		}
		if r.Permissions == nil {
			if u.Permissions != nil {
				t.Errorf("%s: restricted in the file, unrestricted in the code", r.Name)
			}
			continue
		}
		same := func(what string, file *server.SubjectPermission, allow, deny []string) {
			var fa, fd []string
			if file != nil {
				fa, fd = file.Allow, file.Deny
			}
			if !slices.Equal(fa, allow) || !slices.Equal(fd, deny) {
				t.Errorf("%s %s: file allows %v denies %v; code allows %v denies %v", r.Name, what, fa, fd, allow, deny)
			}
		}
		same("publish", u.Permissions.Publish, r.Permissions.Publish, r.Permissions.PublishDeny)
		same("subscribe", u.Permissions.Subscribe, r.Permissions.Subscribe, r.Permissions.SubscribeDeny)
	}
}
