module github.com/worldgate/worldgate/events

go 1.26.0

require (
	github.com/gabriel-vasile/mimetype v1.4.16 // indirect
	github.com/go-playground/locales v0.14.2 // indirect
	github.com/go-playground/universal-translator v0.18.2 // indirect
	github.com/klauspost/compress v1.20.0 // indirect
	github.com/leodido/go-urn v1.5.0 // indirect
	github.com/nats-io/nkeys v0.4.16 // indirect
	github.com/nats-io/nuid v1.0.1 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
)

require (
	github.com/go-json-experiment/json v0.0.0-20260213210345-44df1a37e875
	github.com/go-playground/validator/v10 v10.30.6
	github.com/google/uuid v1.6.0
	github.com/nats-io/nats.go v1.55.0
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3
	github.com/worldgate/worldgate/schemas v0.0.0
	golang.org/x/text v0.43.0
	gopkg.in/yaml.v3 v3.0.1
)

replace github.com/worldgate/worldgate/schemas => ../schemas
