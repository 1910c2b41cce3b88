# Postmortem targets. Included by the top-level Makefile.
EXAMPLE_KERNEL ?= 6.12

.PHONY: html-test
html-test: setup ## drive the postmortem HTML page of the pair examples in headless Chromium (screenshots in build/html-test)
	@command -v chromium >/dev/null || { echo "html-test: chromium missing: run make setup (lab/setup-host.sh installs it)" >&2; exit 1; }
	APMWATCH_BROWSER=1 APMWATCH_SCREENSHOT_DIR=$(BUILD)/html-test $(GO) test -count=1 -run '^TestHTMLInChromium$$' -v ./postmortem

# `make test` renders the HTML too.
test: html-test

.PHONY: examples
examples: build lab-assets ## regenerate examples/*.rec: scenarios recorded in the lab (EXAMPLE_KERNEL=6.12)
	@mkdir -p $(BUILD)/examples examples
	@$(MAKE) --no-print-directory lab-run KERNEL=$(EXAMPLE_KERNEL) CMD='sh /extra/examples.sh' \
		LAB_EXTRA=$(CURDIR)/postmortem/testdata/lab > $(BUILD)/examples/out.txt
	@sh postmortem/testdata/unpack.sh examples < $(BUILD)/examples/out.txt

.PHONY: fuzz-replay
fuzz-replay: ## bounded fuzz run of the whole replay: reader, model, reports (FUZZTIME=20s)
	GO=$(GO) sh tools/fuzz.sh postmortem FuzzReplay $(FUZZTIME) -fuzzminimizetime 5s

# `make test` runs the bounded fuzz run of the replay too.
test: fuzz-replay
