package natsx

import (
	"errors"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// Service is what a Worldgate process registers with NATS service discovery: the workers
// (shared/runtime), edge and the MCP servers. `worldgate status` lists every worldgate-* service
// with its health.
type Service struct {
	// Name is registered as worldgate-<Name>; the process's NATS user may answer discovery
	// only under that name (natsauth's service grant).
	Name        string
	Version     string
	Description string
	Metadata    map[string]string
	// Status is the service's state, answered on its "status" endpoint and in its discovery
	// statistics ($SRV.STATS). It is called on every request and must be quick. By
	// convention it holds "health": "ok", or why the service is not healthy (HealthOK).
	Status func() map[string]any
}

// HealthOK is the "health" of a healthy service; Health turns a readiness error into a health.
const HealthOK = "ok"

// Health is HealthOK when err is nil, and err's text otherwise.
func Health(err error) string {
	if err == nil {
		return HealthOK
	}
	return err.Error()
}

// Register registers s with NATS service discovery on nc, with a "status" endpoint answering
// s.Status. Stop the returned service when the process stops.
func Register(nc *nats.Conn, s Service) (micro.Service, error) {
	if nc == nil || s.Name == "" || s.Status == nil {
		return nil, errors.New("natsx: service discovery needs a connection, a name and a status")
	}
	version := s.Version
	if version == "" {
		version = "0.1.0"
	}
	svc, err := micro.AddService(nc, micro.Config{
		Name:         "worldgate-" + s.Name,
		Version:      version,
		Description:  s.Description,
		Metadata:     s.Metadata,
		StatsHandler: func(*micro.Endpoint) any { return s.Status() },
	})
	if err != nil {
		return nil, err
	}
	if err := svc.AddEndpoint("status", micro.HandlerFunc(func(r micro.Request) { _ = r.RespondJSON(s.Status()) })); err != nil {
		_ = svc.Stop()
		return nil, err
	}
	return svc, nil
}
