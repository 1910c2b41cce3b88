# Fabric targets. Included by the top-level Makefile.
FUZZTIME ?= 7s

.PHONY: fuzz-fabric
fuzz-fabric: ## bounded fuzz runs of the ibnetdiscover and LFT dump parsers (FUZZTIME=7s each)
	GO=$(GO) sh tools/fuzz.sh fabric FuzzParseTopology $(FUZZTIME) -fuzzminimizetime 5s
	GO=$(GO) sh tools/fuzz.sh fabric FuzzParseLFTs $(FUZZTIME) -fuzzminimizetime 5s

# `make test` runs the bounded fuzz runs too.
test: fuzz-fabric
