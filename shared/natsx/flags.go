package natsx

import "flag"

// DefaultURL is where a Worldgate program looks for NATS unless told otherwise.
const DefaultURL = "nats://127.0.0.1:4222"

// RegisterFlags declares the one NATS connection flag set every Worldgate program uses:
// -nats-url, -nats-user, -nats-password, -nats-creds (with WORLDGATE_NATS_* equivalents
// through shared/config). c's fields are the defaults; an empty URL defaults to DefaultURL
// unless optional is true (the program then runs without NATS when none is given). user
// says which NATS user the program connects as (deploy/nats).
func (c *ConnConfig) RegisterFlags(fs *flag.FlagSet, user string, optional bool) {
	url, help := c.URL, "NATS server URL"
	if url == "" && !optional {
		url = DefaultURL
	}
	if optional {
		help += " (empty: run without NATS)"
	}
	userHelp := "NATS user"
	if user != "" {
		userHelp += " (deploy/nats: " + user + ")"
	}
	fs.StringVar(&c.URL, "nats-url", url, help)
	fs.StringVar(&c.User, "nats-user", c.User, userHelp)
	fs.StringVar(&c.Password, "nats-password", c.Password, "NATS password (prefer the environment variable)")
	fs.StringVar(&c.Creds, "nats-creds", c.Creds, "NATS .creds file (decentralised auth)")
}
