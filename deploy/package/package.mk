# Packages an operator installs: .deb and .rpm built with nfpm (pinned in
# go.mod's tool block), and releasing them (docs/release.md). Included by
# the top-level Makefile.
PKG_BUILD   := $(BUILD)/pkg
PKG_STAGE   := $(PKG_BUILD)/stage
PKG_MAINTAINER := $(shell sed -n 's/^maintainer: //p' deploy/package/nfpm.yaml)
# The Makefile's VERSION (deploy/package/version.sh, worked out once: a
# commit landing during the build does not change it): the packages carry
# the version the binary says.
PKG_VERSION := $(VERSION)
PKG_NFPM     = APMWATCH_PKG_VERSION='$(PKG_VERSION)' APMWATCH_PKG_STAGE=$(PKG_STAGE) $(GO) tool nfpm package --target $(PKG_BUILD)/

.PHONY: package package-test release

package: ## build $(BUILD)/pkg/*.deb, *.rpm and SHA256SUMS: binary, systemd units and drop-ins, maintainer scripts, default configs, example policy, logrotate, man pages, completions, licences, changelog
	@[ -n '$(PKG_VERSION)' ] || { echo "package: no version: deploy/package/version.sh failed (or give PKG_VERSION)" >&2; exit 1; }
	@rm -rf $(PKG_BUILD) && mkdir -p $(PKG_STAGE)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(PKG_STAGE)/apmwatch ./cmd/apmwatch
	$(GO) run -tags gendocs ./cmd/apmwatch gen-docs $(PKG_STAGE)
	$(GO) run ./deploy/package/gen unit -bin /usr/bin/apmwatch -o $(PKG_STAGE)/systemd deploy/apmwatch-audit.service deploy/apmwatch-fleet.service
	gzip -9n $(PKG_STAGE)/man1/*.1
	$(GO) run ./deploy/package/gen notices -o $(PKG_STAGE)/NOTICES $(PKG_STAGE)/apmwatch
	$(GO) run ./deploy/package/gen changelog -version '$(PKG_VERSION)' -date "$$(git log -1 --format=%cI 2>/dev/null)" \
		-packager '$(PKG_MAINTAINER)' -deb $(PKG_STAGE)/changelog -rpm $(PKG_STAGE)/changelog.yaml CHANGELOG.md
	gzip -9n $(PKG_STAGE)/changelog
	$(GO) run ./deploy/package/gen nfpm -stage $(PKG_STAGE) -changelog $(PKG_STAGE)/changelog.yaml -o $(PKG_STAGE) deploy/package/nfpm.yaml
	$(PKG_NFPM) --packager deb --config $(PKG_STAGE)/nfpm-deb.yaml
	$(PKG_NFPM) --packager rpm --config $(PKG_STAGE)/nfpm-rpm.yaml
	cd $(PKG_BUILD) && sha256sum *.deb *.rpm > SHA256SUMS

package-test: setup package ## install the .deb into a scratch root: systemd-analyze verify with each drop-in enabled, man, bash completion, licences; the .rpm's files; lintian and rpmlint
	APMWATCH_PKG_DIR=$(PKG_BUILD) APMWATCH_PKG_VERSION='$(PKG_VERSION)' $(GO) test -count=1 -v -run '^TestPackages$$' ./deploy/package

release: ## on a release tag vX.Y.Z with a clean tree: the packages, checked (package-test), and their SHA256SUMS (docs/release.md)
	@v=$$(deploy/package/release-check.sh) && $(MAKE) --no-print-directory package-test PKG_VERSION="$$v"
	cd $(PKG_BUILD) && sha256sum -c SHA256SUMS

# `make test` builds and checks the packages too.
test: package-test
