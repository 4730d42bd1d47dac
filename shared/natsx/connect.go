package natsx

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ConnConfig says how a worker connects to NATS.
type ConnConfig struct {
	URL      string
	Name     string // client name shown in server monitoring
	User     string
	Password string
	Creds    string // path to a .creds file (NATS decentralised auth)
}

// Connect connects with reconnection forever (a worker waits out a NATS restart instead of
// dying) and returns the connection and its JetStream context. With a user, the connection's
// inboxes are InboxPrefix(user), the only ones that user may subscribe to.
func Connect(cfg ConnConfig, log *slog.Logger) (*nats.Conn, jetstream.JetStream, error) {
	opts := []nats.Option{
		nats.Name(cfg.Name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.ReconnectJitter(100*time.Millisecond, time.Second),
		nats.RetryOnFailedConnect(true),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("NATS disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) { log.Info("NATS reconnected", "url", nc.ConnectedUrlRedacted()) }),
		// Asynchronous errors, permissions violations among them, go to the log (nats.go would
		// print them to stderr).
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			if sub != nil {
				log.Warn("NATS error", "err", err, "subject", sub.Subject)
				return
			}
			log.Warn("NATS error", "err", err)
		}),
	}
	if cfg.User != "" {
		opts = append(opts, nats.UserInfo(cfg.User, cfg.Password), nats.CustomInboxPrefix(InboxPrefix(cfg.User)))
	}
	if cfg.Creds != "" {
		opts = append(opts, nats.UserCredentials(cfg.Creds))
	}
	nc, err := nats.Connect(cfg.URL, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("connect to NATS at %s: %w", cfg.URL, err)
	}
	if err := refused(nc, 2*time.Second); err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("NATS at %s refused user %q: %w (check the user and password, e.g. -nats-user and -nats-password)", cfg.URL, cfg.User, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("JetStream context: %w", err)
	}
	return nc, js, nil
}

// refused waits up to d for the outcome of the first connection attempt and returns the
// server's reason if it closed the connection (a wrong user or password: nats.go gives up on
// those rather than retrying). A server not reachable yet is no error: the connection keeps
// trying in the background.
func refused(nc *nats.Conn, d time.Duration) error {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		switch nc.Status() {
		case nats.CONNECTED:
			return nil
		case nats.CLOSED:
			if err := nc.LastError(); err != nil {
				return err
			}
			return nats.ErrConnectionClosed
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}
