// Package schemas holds Worldgate's versioned JSON Schemas (draft 2020-12) for every message on
// the bus and every event and proposal payload, embedded so that Go code validates with exactly
// the files that other-language publishers read from this folder.
//
// It has no dependencies and no behaviour beyond naming and serving the files; validation lives
// in the events module.
package schemas

import (
	"embed"
	"io/fs"
	"strings"
)

//go:embed v1
var files embed.FS

// BaseURI is the prefix of every schema's $id. Nothing is fetched from it: it only names schemas.
const BaseURI = "https://worldgate.dev/schemas/"

// Message schemas, by path below the version folder.
const (
	Envelope    = "v1/envelope.json"
	Proposal    = "v1/proposal.json"
	Rejection   = "v1/rejection.json"
	DomainEvent = "v1/domain-event.json"
	Outcome     = "v1/outcome.json"
	// World is the world file's format (`worldgate world load`), not a message.
	World = "v1/world.json"
)

// FS returns the embedded schema tree (v1/…).
func FS() fs.FS { return files }

// EventPayload is the path of the payload schema for a world event type such as "Player.Moved".
func EventPayload(eventType string) string {
	return "v1/events/" + strings.ToLower(eventType) + ".json"
}

// ProposalPayload is the path of the payload schema for a proposal kind such as "ambience".
func ProposalPayload(kind string) string {
	return "v1/proposals/" + kind + ".json"
}

// URI is the $id of the schema at path.
func URI(path string) string { return BaseURI + path }
