# Worldgate — two commands matter: `make run` and `make test` (`make test-fast` while working).
SHELL := /bin/bash
GO ?= go
MODULES := events schemas shared services deploy scripts
# Packages whose tests run with the race detector (the rest run without it to keep `make test`
# near eight minutes warm on two cores).
RACE_MODULES := events shared
# A count, not a duration: with a duration, Go 1.26's fuzz coordinator can report a bare
# "context deadline exceeded" failure at the deadline while a worker is mid-input (go.dev/issue/75804,
# fixed in Go 1.27); a count has no deadline to race. 100,000 inputs take about 3-10 s per target here.
FUZZTIME ?= 100000x

.PHONY: run test test-fast vet fmt-check unit unit-short fuzz rules bench build clean lint
# golangci-lint (.golangci.yml), pinned: `make lint` installs this version from the Go module proxy
# when the one on the path (or in GOBIN) is missing or another.
GOLANGCI_LINT_VERSION := v2.15.0
GOLANGCI_LINT ?= $(or $(shell $(GO) env GOBIN),$(shell $(GO) env GOPATH)/bin)/golangci-lint

## run: the whole stack in one process on embedded defaults (Ctrl-C stops it)
# Built first rather than `go run`, so that Ctrl-C reaches worldgate itself and a clean drain
# exits 0.
run:
	@mkdir -p bin
	$(GO) build -o bin/worldgate github.com/worldgate/worldgate/services/worldgate
	./bin/worldgate dev

## build: every binary into ./bin
build:
	@mkdir -p bin
	cd services && for d in worldgate graphd gate event-processor memory-writer ai-worker mcp-world mcp-lore mcp-classify mcp-propose edge; do \
		[ -f $$d/main.go ] && $(GO) build -o ../bin/$$d ./$$d || exit 1; done

## images: one container image per program (deploy/docker/Dockerfile; needs Docker with BuildKit)
IMAGES := worldgate graphd gate event-processor memory-writer ai-worker mcp-world mcp-lore mcp-classify mcp-propose edge
VERSION ?= dev
images:
	for s in $(IMAGES); do docker build -f deploy/docker/Dockerfile --target $$s -t worldgate/$$s:$(VERSION) . || exit 1; done

## test: vet, formatting, every module's tests, a short fuzz of each decoder of outside input, and the
## Prometheus rules' promtool tests
test: vet fmt-check unit fuzz rules

## test-fast: vet, formatting and every module's tests with -short: the end-to-end tests (a dev
## stack, a process stack, a NATS cluster) and the others over about five seconds skip, each
## saying so (shared/slowtest); no race detector, no fuzzing, no promtool. Warm, 3.7 minutes on
## two busy cores (`make test` 10.9 there; 8.0 on a quiet machine since its modules share go test).
test-fast: vet fmt-check unit-short

## lint: golangci-lint over every module (each is linted on its own: golangci-lint runs per module)
lint:
	@if [ "$$($(GOLANGCI_LINT) version --short 2>/dev/null)" != "$(GOLANGCI_LINT_VERSION:v%=%)" ]; then \
		echo "== installing golangci-lint $(GOLANGCI_LINT_VERSION)"; \
		GOFLAGS= $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION) || exit 1; \
	fi
	@failed=""; for m in $(MODULES); do echo "== golangci-lint in $$m"; (cd $$m && $(GOLANGCI_LINT) run ./...) || failed="$$failed $$m"; done; \
		if [ -n "$$failed" ]; then echo "golangci-lint found problems in:$$failed"; exit 1; fi

vet:
	@for m in $(MODULES); do (cd $$m && $(GO) vet ./...) || exit 1; done

fmt-check:
	@out=$$(gofmt -l $(MODULES)); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

# TypeScript (clients/typescript's devDependencies, from npm at the lockfile's versions): the
# TypeScript client's tests and docs/integrate.md's TypeScript block compile with its tsc.
TS_DEPS := clients/typescript/node_modules/.package-lock.json
$(TS_DEPS): clients/typescript/package-lock.json clients/typescript/package.json
	cd clients/typescript && npm ci --no-audit --no-fund

# The race modules in one go test, the other modules of go.work in another (so that the slowest
# packages of one module run beside the next module's: a loop over the modules took 9.5 minutes
# warm, this 8.0), deploy, outside go.work, on its own.
unit: $(TS_DEPS)
	@echo "== go test -race in $(RACE_MODULES)"
	$(GO) test -race -count=1 -timeout 8m $(RACE_MODULES:%=./%/...)
	@echo "== go test in $(filter-out $(RACE_MODULES),$(WORKSPACE_MODULES))"
	$(GO) test -count=1 -timeout 8m $(patsubst %,./%/...,$(filter-out $(RACE_MODULES),$(WORKSPACE_MODULES)))
	@echo "== go test in deploy"
	cd deploy && $(GO) test -count=1 -timeout 8m ./...

# One go test over the modules of go.work, so that a module's slowest packages run beside the
# next module's; deploy is a module outside go.work and runs on its own.
WORKSPACE_MODULES := $(filter-out deploy,$(MODULES))
unit-short:
	@echo "== go test -short in $(WORKSPACE_MODULES)"
	$(GO) test -short -count=1 -timeout 8m $(WORKSPACE_MODULES:%=./%/...)
	@echo "== go test -short in deploy"
	cd deploy && $(GO) test -short -count=1 -timeout 8m ./...

fuzz:
	cd events && $(GO) test -run '^$$' -fuzz '^FuzzDecodeEnvelope$$' -fuzztime $(FUZZTIME) .
	@if [ -d services/graphd/graphbinary ]; then cd services && for f in $$($(GO) test -list '^Fuzz' ./graphd/graphbinary | grep '^Fuzz'); do \
		$(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) ./graphd/graphbinary || exit 1; done; fi

## rules: the Prometheus configuration and rules are valid and the alerts pass their unit tests
rules:
	promtool check config deploy/prometheus/prometheus.yml
	promtool test rules deploy/prometheus/tests/*.yml

## bench: the benchmarks, with figures
bench:
	@for m in $(MODULES); do (cd $$m && $(GO) test -run '^$$' -bench . -benchmem ./...) || exit 1; done

clean:
	rm -rf bin .worldgate
