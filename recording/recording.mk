# Recording targets. Included by the top-level Makefile.
FUZZTIME ?= 7s

.PHONY: fuzz-short
fuzz-short: ## bounded fuzz run of the recording reader (FUZZTIME=7s)
	GO=$(GO) sh tools/fuzz.sh recording FuzzReader $(FUZZTIME)

# `make test` runs the bounded fuzz run too.
test: fuzz-short
