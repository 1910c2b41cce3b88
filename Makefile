# apmwatch: InfiniBand APM watcher. `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

GO        ?= go
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT    ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS   := -s -w -X github.com/apmwatch/apmwatch/internal/version.Version=$(VERSION) \
             -X github.com/apmwatch/apmwatch/internal/version.Commit=$(COMMIT)
# Downloads (Debian packages, kernels) are cached here; git-ignored.
CACHE     ?= $(CURDIR)/.cache
BUILD     ?= $(CURDIR)/build
export CACHE BUILD

.PHONY: help
help: ## list the targets
	@awk 'BEGIN{FS=":.*## "} /^[a-zA-Z0-9_.-]+:.*## /{printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## build the static binary bin/apmwatch (CGO_ENABLED=0, no clang needed)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/apmwatch ./cmd/apmwatch

.PHONY: generate
generate: ## regenerate the bpf2go objects from bpf/ (needs clang)
	$(GO) generate ./...

.PHONY: unit
unit: ## run the unit tests (no root, no lab)
	$(GO) test ./...

.PHONY: check-generated
check-generated: setup ## regenerate the bpf2go objects (clang) and fail if they differ from the committed ones
	$(GO) generate ./collector/
	@changed=$$(git status --porcelain -- collector/ | grep -E '_bpfe[lb]\.(go|o)$$'); \
	[ -z "$$changed" ] || { echo "check-generated: committed BPF objects are stale (run make generate and commit):"; echo "$$changed"; exit 1; }

.PHONY: clean
clean: ## remove build outputs (keeps the download cache)
	rm -rf bin build

include tools/lint.mk
include lab/lab.mk
include recording/recording.mk
include output/output.mk
include postmortem/postmortem.mk
include audit/audit.mk
include deploy/prometheus/prometheus.mk
include deploy/package/package.mk
include deploy/deploy.mk
include fleet/fleet.mk
include actuator/actuator.mk
