# Fleet targets. Included by the top-level Makefile.
FUZZTIME ?= 20s

.PHONY: fuzz-fleet
fuzz-fleet: ## bounded fuzz runs of what the fleet reads: connection records and finding lines from NATS, the publish queue's segment files (FUZZTIME=20s each)
	$(GO) test -run '^$$' -fuzz '^FuzzConnRecord$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./fleet
	$(GO) test -run '^$$' -fuzz '^FuzzFindingLine$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./fleet
	$(GO) test -run '^$$' -fuzz '^FuzzQueueSegment$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./fleet

# `make test` runs the bounded fuzz runs too.
test: fuzz-fleet
