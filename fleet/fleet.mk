# Fleet targets. Included by the top-level Makefile.
FUZZTIME ?= 7s

.PHONY: fuzz-fleet
fuzz-fleet: ## bounded fuzz runs of what the fleet reads: connection records and finding lines from NATS, the publish queue's segment files, the engine's JSON decoder against encoding/json, subject tokens against their rune-at-a-time definition (FUZZTIME=7s each)
	GO=$(GO) sh tools/fuzz.sh fleet FuzzConnRecord $(FUZZTIME) -fuzzminimizetime 5s
	GO=$(GO) sh tools/fuzz.sh fleet FuzzFindingLine $(FUZZTIME) -fuzzminimizetime 5s
	GO=$(GO) sh tools/fuzz.sh fleet/publish FuzzQueueSegment $(FUZZTIME) -fuzzminimizetime 5s
	GO=$(GO) sh tools/fuzz.sh fleet FuzzDecodeJSONAsTheStandardLibrary $(FUZZTIME) -fuzzminimizetime 5s
	GO=$(GO) sh tools/fuzz.sh fleet/wire FuzzTokenAsRunes $(FUZZTIME) -fuzzminimizetime 5s

# `make test` runs the bounded fuzz runs too.
test: fuzz-fleet

# The fleet's tests against a 3-node cluster of nats-server processes
# (built from the module go.mod requires), R3 streams and leases: every
# test of the fleet's packages, and the fault test at length (every node killed in
# turn, an instance killed and brought back three times). make test runs
# the fault test's short version against the cluster and the rest against
# the embedded server.
.PHONY: fleet-faults
fleet-faults: ## the fleet tests against a 3-node nats-server cluster, faults at length (minutes)
	APMWATCH_FLEET_NATS=cluster APMWATCH_FLEET_FAULTS=long $(GO) test -count=1 -v -timeout 40m ./fleet/...

# The fleet end to end at scale (fleet/scale_test.go): records of 1,000
# hosts in a nats-server process, `apmwatch fleet` in its own process:
# start, a storm with the fleet stopped 3 s in its middle (exactly the
# true findings), restart, takeover, and the storm again against
# FLEET_SCALE_INSTANCES instances sharing the partitions; each step's
# time, CPU and RSS logged. make test runs it at 2,000 connections.
FLEET_SCALE ?= 10000,100000,1000000
FLEET_SCALE_INSTANCES ?= 4
.PHONY: fleet-scale
fleet-scale: ## the fleet end to end at 10k, 100k and 1M connections (FLEET_SCALE=...; up to an hour)
	APMWATCH_FLEET_SCALE=$(FLEET_SCALE) APMWATCH_FLEET_SCALE_INSTANCES=$(FLEET_SCALE_INSTANCES) \
		$(GO) test -count=1 -v -timeout 120m -run '^TestFleetEndToEndAtScale$$' ./fleet/
