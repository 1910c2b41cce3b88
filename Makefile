# apmwatch: InfiniBand APM watcher. `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

GO        ?= go
# The one version, the binary's (apmwatch version) and the packages': from
# the nearest release tag (deploy/package/version.sh: v1.2.3 gives 1.2.3, N
# commits after it 1.2.3+git<N>.<commit>, no tag 0.0.0+git<N>.<commit>),
# worked out once. VERSION=... (or its old name PKG_VERSION=...) overrides it.
ifneq ($(origin PKG_VERSION),undefined)
VERSION := $(PKG_VERSION)
endif
ifeq ($(origin VERSION),undefined)
VERSION := $(shell deploy/package/version.sh 2>/dev/null)
endif
COMMIT    ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS   := -s -w -X github.com/apmwatch/apmwatch/internal/version.Version=$(or $(VERSION),dev) \
             -X github.com/apmwatch/apmwatch/internal/version.Commit=$(COMMIT)
# Downloads (Debian packages, kernels) are cached here; git-ignored.
CACHE     ?= $(CURDIR)/.cache
BUILD     ?= $(CURDIR)/build
export CACHE BUILD

.PHONY: help
help: ## list the targets
	@awk 'BEGIN{FS=":.*## "} /^[a-zA-Z0-9_.-]+:.*## /{printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: version
version: ## print the version the binary and the packages carry
	@echo '$(or $(VERSION),dev)'

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
include fabric/fabric.mk
include actuator/actuator.mk
