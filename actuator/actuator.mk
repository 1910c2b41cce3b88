# Actuator targets. Included by the top-level Makefile.
FUZZTIME ?= 20s

.PHONY: fuzz-policy
fuzz-policy: ## bounded fuzz run of the policy loader (FUZZTIME=20s)
	$(GO) test -run '^$$' -fuzz '^FuzzPolicy$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./actuator

# `make test` runs the bounded fuzz run too.
test: fuzz-policy
