# Output targets. Included by the top-level Makefile.
FUZZTIME ?= 7s

.PHONY: fuzz-json
fuzz-json: ## bounded fuzz run of the JSON line encoder against the reflective reference (FUZZTIME=7s)
	GO=$(GO) sh tools/fuzz.sh output FuzzJSON $(FUZZTIME)

# `make test` runs the bounded fuzz run too.
test: fuzz-json
