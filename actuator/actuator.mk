# Actuator targets. Included by the top-level Makefile.
FUZZTIME ?= 7s

.PHONY: fuzz-policy
fuzz-policy: ## bounded fuzz run of the policy loader (FUZZTIME=7s)
	GO=$(GO) sh tools/fuzz.sh actuator FuzzPolicy $(FUZZTIME) -fuzzminimizetime 5s

# `make test` runs the bounded fuzz run too.
test: fuzz-policy
