package natsx

import (
	"strings"

	"github.com/nats-io/nats-server/v2/server"
)

// User is a NATS user with what it may publish and subscribe to. Worldgate's users and their
// permissions are computed in one place (shared/natsx/natsauth); this type carries them to the
// embedded server.
type User struct {
	Name     string
	Password string
	// Permissions nil allows everything (the provisioning admin).
	Permissions *Permissions
}

// Permissions are a user's publish and subscribe allow and deny lists (NATS subject patterns).
// A deny entry wins over an allow entry.
type Permissions struct {
	Publish       []string
	PublishDeny   []string
	Subscribe     []string
	SubscribeDeny []string
}

// InboxPrefix is the inbox prefix of user's connections: _INBOX.<user>. Each user may
// subscribe only to its own inboxes, so no worker can read the replies (JetStream acks, API
// answers, key-value reads) meant for another. Without a user it is NATS's default, _INBOX.
func InboxPrefix(user string) string {
	if user == "" {
		return "_INBOX"
	}
	return "_INBOX." + user
}

// serverUsers turns users into the server's options.
func serverUsers(users []User) []*server.User {
	out := make([]*server.User, 0, len(users))
	for _, u := range users {
		su := &server.User{Username: u.Name, Password: u.Password}
		if p := u.Permissions; p != nil {
			su.Permissions = &server.Permissions{
				Publish:   &server.SubjectPermission{Allow: p.Publish, Deny: p.PublishDeny},
				Subscribe: &server.SubjectPermission{Allow: p.Subscribe, Deny: p.SubscribeDeny},
			}
		}
		out = append(out, su)
	}
	return out
}

// validUserName reports whether name can be a user name and an inbox token.
func validUserName(name string) bool {
	return name != "" && !strings.ContainsAny(name, " \t\r\n.*>")
}
