# Packages an operator installs: .deb and .rpm built with nfpm (pinned in
# go.mod's tool block). Included by the top-level Makefile.
PKG_BUILD   := $(BUILD)/pkg
PKG_STAGE   := $(PKG_BUILD)/stage
# A release tag vX.Y.Z gives X.Y.Z; otherwise 0.0.0+git<commit>.
PKG_VERSION ?= $(shell v=$$(git describe --tags --match 'v[0-9]*' 2>/dev/null) && echo "$${v\#v}" | tr - + || echo "0.0.0+git$$(git rev-parse --short HEAD 2>/dev/null || echo unknown)")

.PHONY: package package-test

package: ## build $(BUILD)/pkg/*.deb and *.rpm: binary, systemd unit, default config, man pages, shell completions
	@rm -rf $(PKG_BUILD) && mkdir -p $(PKG_STAGE)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(PKG_STAGE)/apmwatch ./cmd/apmwatch
	$(GO) run -tags gendocs ./cmd/apmwatch gen-docs $(PKG_STAGE)
	gzip -9n $(PKG_STAGE)/man1/*.1
	@for p in deb rpm; do \
		APMWATCH_PKG_VERSION='$(PKG_VERSION)' APMWATCH_PKG_STAGE=$(PKG_STAGE) \
			$(GO) tool nfpm package --config deploy/package/nfpm.yaml --packager $$p --target $(PKG_BUILD)/ || exit 1; \
	done

package-test: setup package ## install the .deb into a scratch root; systemd-analyze verify, man, bash completion; the .rpm's files
	APMWATCH_PKG_DIR=$(PKG_BUILD) $(GO) test -count=1 -v -run '^TestPackages$$' ./deploy/package

# `make test` builds and checks the packages too.
test: package-test
