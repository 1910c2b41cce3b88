# Fleet targets. Included by the top-level Makefile.
FUZZTIME ?= 7s

.PHONY: fuzz-fleet
fuzz-fleet: ## bounded fuzz runs of what the fleet reads: connection records and finding lines from NATS, the publish queue's segment files (FUZZTIME=7s each)
	GO=$(GO) sh tools/fuzz.sh fleet FuzzConnRecord $(FUZZTIME) -fuzzminimizetime 5s
	GO=$(GO) sh tools/fuzz.sh fleet FuzzFindingLine $(FUZZTIME) -fuzzminimizetime 5s
	GO=$(GO) sh tools/fuzz.sh fleet FuzzQueueSegment $(FUZZTIME) -fuzzminimizetime 5s

# `make test` runs the bounded fuzz runs too.
test: fuzz-fleet
