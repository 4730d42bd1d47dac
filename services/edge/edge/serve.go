package edge

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/worldgate/worldgate/shared/natsx"
)

// Name is edge's service name (NATS service discovery: worldgate-edge) and NATS user.
const Name = "edge"

// Serve serves the API on ln until ctx ends, then drains: open SSE streams end (clients
// resume with Last-Event-ID), requests in flight finish within drain, and it returns.
func (s *Server) Serve(ctx context.Context, ln net.Listener, drain time.Duration) error {
	hs := &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.Shutdown()
	sctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	err := hs.Shutdown(sctx)
	if e := <-errc; !errors.Is(e, http.ErrServerClosed) && err == nil {
		err = e
	}
	return err
}

// Register registers edge with NATS service discovery (`worldgate status` lists it) and answers
// its "status" endpoint with the URL it serves.
func Register(nc *nats.Conn, version, url string) (micro.Service, error) {
	return natsx.Register(nc, natsx.Service{Name: Name, Version: version,
		Description: "HTTP API: publish world events, receive outcomes (SSE, long poll)", Metadata: map[string]string{"url": url},
		Status: func() map[string]any {
			return map[string]any{"service": Name, "url": url, "health": natsx.Health(statusOf(nc))}
		}})
}

// statusOf is edge's health: it serves only while connected to NATS.
func statusOf(nc *nats.Conn) error {
	if !nc.IsConnected() {
		return fmt.Errorf("NATS: %s", nc.Status())
	}
	return nil
}
