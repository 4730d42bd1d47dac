package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ConnectOptions says where to connect and as whom. Either Endpoints (the endpoints.json that
// `worldgate dev` writes into its data directory, .worldgate/endpoints.json by default: it holds
// nats.url and each NATS user's credentials), or URL with Role and Password, or URL with
// CredsFile (a NATS .creds file: user JWT and nkey seed). Fields set beside Endpoints override
// what it says.
type ConnectOptions struct {
	Endpoints string // path of worldgate dev's endpoints.json
	// Role is the NATS user: "publisher" (the default: publish events, read outcomes),
	// "operator", "admin" or "approver-<name>". Worldgate's permissions let each user receive
	// replies only on its own inboxes, _INBOX.<user>.>, so Connect sets that inbox prefix; with
	// a CredsFile, Role still names the user the prefix is made of.
	Role string

	URL            string // e.g. nats://127.0.0.1:4222; overrides the endpoints' nats.url
	User, Password string // override the endpoints' credentials; User defaults to Role
	CredsFile      string
	Name           string        // the connection's name as the server shows it (default "worldgate-events/<role>")
	Options        []nats.Option // further nats.go options, applied last
}

// Connect connects to Worldgate's NATS server as o.Role with the inbox prefix its permissions
// require, and returns the JetStream context Publish, Await and Watch take and a func that
// drains and closes the connection. A connection made without that prefix can publish, but
// never hears JetStream's acknowledgements: Publish times out and Await waits for its deadline.
func Connect(ctx context.Context, o ConnectOptions) (jetstream.JetStream, func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	role := o.Role
	if role == "" {
		role = "publisher"
	}
	url, user, password := o.URL, o.User, o.Password
	if o.Endpoints != "" {
		eurl, euser, epass, err := endpointsCredentials(o.Endpoints, role)
		if err != nil {
			return nil, nil, err
		}
		url = cmpOr(url, eurl)
		if o.CredsFile == "" {
			user, password = cmpOr(user, euser), cmpOr(password, epass)
		}
	}
	if url == "" {
		return nil, nil, errors.New("connect: no NATS URL: set ConnectOptions.Endpoints (worldgate dev's endpoints.json) or URL")
	}
	if user == "" {
		user = role
	}
	if o.CredsFile == "" && password == "" {
		return nil, nil, errors.New("connect: no credentials: set ConnectOptions.Endpoints, Password (for Role's user) or CredsFile (Worldgate's NATS server accepts only its users)")
	}
	opts := []nats.Option{
		nats.Name(cmpOr(o.Name, "worldgate-events/"+role)),
		nats.CustomInboxPrefix("_INBOX." + user),
		nats.MaxReconnects(-1),
	}
	if o.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(o.CredsFile))
	} else {
		opts = append(opts, nats.UserInfo(user, password))
	}
	opts = append(opts, o.Options...)
	if dl, ok := ctx.Deadline(); ok {
		if d := time.Until(dl); d > 0 {
			opts = append([]nats.Option{nats.Timeout(d)}, opts...)
		}
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("connect to %s as %s: %w", url, user, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("jetstream on %s: %w", url, err)
	}
	return js, func() { _ = nc.Drain() }, nil
}

// endpointsCredentials reads nats.url and role's credentials from an endpoints.json.
func endpointsCredentials(path, role string) (url, user, password string, err error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", "", "", fmt.Errorf("connect: read endpoints (worldgate dev writes them to <data dir>/endpoints.json): %w", err)
	}
	var ep map[string]json.RawMessage
	if err := json.Unmarshal(raw, &ep); err != nil {
		return "", "", "", fmt.Errorf("connect: %s is not an endpoints.json: %w", path, err)
	}
	_ = json.Unmarshal(ep["nats.url"], &url)
	type creds struct{ User, Password string }
	var c creds
	if name, ok := strings.CutPrefix(role, "approver-"); ok {
		var approvers map[string]creds
		_ = json.Unmarshal(ep["nats.approvers"], &approvers)
		c = approvers[name]
	} else {
		_ = json.Unmarshal(ep["nats."+role], &c)
	}
	if c.User == "" {
		return "", "", "", fmt.Errorf("connect: %s names no NATS user %q (it has publisher, operator, admin and approver-<name>)", path, role)
	}
	return url, c.User, c.Password, nil
}
