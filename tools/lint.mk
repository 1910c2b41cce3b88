# make lint: the static checks. No root, no lab, no clang: gofmt, go vet,
# staticcheck's unused check (a go tool, pinned in go.mod) and the import
# rules (internal/layering). Every build tag the module uses is on, so the
# lab's guest tests (labguest) and the man page generator (gendocs) are
# checked too. Included by the top-level Makefile.

LINT_TAGS := labguest,gendocs

.PHONY: lint
lint: ## gofmt, go vet, staticcheck's unused check, the import rules (no root, no lab)
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '_bpfe[lb]\.go$$')); [ -z "$$out" ] || { echo "gofmt needed: $$out"; exit 1; }
	$(GO) vet -tags $(LINT_TAGS) ./...
	$(GO) tool staticcheck -checks U1000 -tags $(LINT_TAGS) ./...
	$(GO) test -count=1 ./internal/layering/

# The committed BPF objects are checked against bpf/ by make test (it needs
# clang, which setup installs as root), not by make lint.
test: check-generated
