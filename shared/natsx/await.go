package natsx

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// StartupWait is how long a worker waits at start for JetStream to answer before it gives up:
// long enough for a cluster to elect its leaders after a node was lost or restarted (seconds,
// tens of seconds on a loaded machine), short enough that a worker pointed at the wrong place
// says so.
const StartupWait = 2 * time.Minute

// attemptTimeout bounds one request of Await: a request sent while the cluster elects a leader
// may never be answered, and a fresh one reaches the new leader.
const attemptTimeout = 5 * time.Second

// Await runs op until it succeeds, fails for good, or StartupWait (or ctx) runs out. Each
// attempt gets a context of its own of at most 5 s. An error is for good when waiting cannot
// change it: a missing stream, bucket or consumer (the topology is not provisioned), a request
// the server refuses as invalid or forbidden, a stream or bucket it has no store for, a closed
// connection. Timeouts, "no responders", a
// JetStream that is not (yet) available, peers offline and lost connections are retried with
// backoff, and every retry is logged with what it waits for.
func Await(ctx context.Context, what string, log *slog.Logger, op func(ctx context.Context) error) error {
	return awaitEach(ctx, what, log, attemptTimeout, op)
}

// awaitEach is Await with attempts of at most per each.
func awaitEach(ctx context.Context, what string, log *slog.Logger, per time.Duration, op func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, StartupWait)
	defer cancel()
	started := time.Now()
	var last error
	_, err := backoff.Retry(ctx, func() (struct{}, error) {
		actx, acancel := context.WithTimeout(ctx, per)
		defer acancel()
		last = op(actx)
		if last != nil && Permanent(last) {
			return struct{}{}, backoff.Permanent(last)
		}
		return struct{}{}, last
	}, backoff.WithBackOff(&backoff.ExponentialBackOff{InitialInterval: 250 * time.Millisecond, RandomizationFactor: 0.2,
		Multiplier: 2, MaxInterval: 5 * time.Second}),
		backoff.WithMaxElapsedTime(0),
		backoff.WithNotify(func(err error, next time.Duration) {
			if log != nil {
				log.Warn("JetStream did not answer yet: waiting (a cluster electing a leader, a server starting)",
					"for", what, "err", err, "retry_in", next.Round(time.Millisecond), "waited", time.Since(started).Round(time.Millisecond))
			}
		}))
	if err == nil {
		return nil
	}
	if last != nil && !Permanent(last) {
		return fmt.Errorf("%s: JetStream did not answer within %s: %w", what, time.Since(started).Round(time.Second), last)
	}
	if last == nil {
		last = err
	}
	return fmt.Errorf("%s: %w", what, last)
}

// AwaitKeyValue is js.KeyValue(bucket) under Await: a missing bucket fails at once, a cluster
// that cannot answer yet is waited for.
func AwaitKeyValue(ctx context.Context, js jetstream.JetStream, bucket string, log *slog.Logger) (jetstream.KeyValue, error) {
	var kv jetstream.KeyValue
	err := Await(ctx, "key-value bucket "+bucket, log, func(ctx context.Context) error {
		var err error
		kv, err = js.KeyValue(ctx, bucket)
		return err
	})
	return kv, err
}

// Permanent reports whether err is one that waiting cannot change (see Await).
func Permanent(err error) bool {
	switch {
	case errors.Is(err, jetstream.ErrBucketNotFound), errors.Is(err, jetstream.ErrStreamNotFound),
		errors.Is(err, jetstream.ErrConsumerNotFound), errors.Is(err, jetstream.ErrInvalidBucketName),
		errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrBadSubject),
		errors.Is(err, nats.ErrPermissionViolation), errors.Is(err, nats.ErrAuthorization),
		insufficientStorage(err):
		return true
	}
	var api *jetstream.APIError
	if errors.As(err, &api) {
		if api.ErrorCode == jsClusterNoPeers {
			return false // peers offline: they come back
		}
		switch api.Code {
		case http.StatusBadRequest, http.StatusForbidden, http.StatusNotFound, http.StatusConflict:
			return true
		}
	}
	return false
}

// jsClusterNoPeers is the server's "no suitable peers for placement" (JSClusterNoPeersErrF), a
// 400 that a cluster with nodes offline answers until they are back.
const jsClusterNoPeers jetstream.ErrorCode = 10005
