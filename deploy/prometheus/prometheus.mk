# The Prometheus rules and Grafana dashboard, proven on Debian's Prometheus
# in the lab. Included by the top-level Makefile.
PROM_BUILD := $(BUILD)/prom

.PHONY: prom-rules-test prom-test prom-testdata

# The rules' syntax and their promtool unit tests (every alert firing and
# quiet), as they are in the repository: no lab.
prom-rules-test: setup ## promtool check rules and promtool test rules on deploy/prometheus (no lab)
	@command -v promtool >/dev/null || { echo "prom-rules-test: promtool missing: run make setup" >&2; exit 1; }
	promtool check rules deploy/prometheus/apmwatch-rules.yaml
	promtool test rules deploy/prometheus/testdata/rules-test.yaml

# Each kernel's guest runs deploy/prometheus/testdata/lab/e2e.sh with the
# prometheus binary, its config and the rules at /extra; the host-side test
# reads what it printed.
prom-test: setup $(LAB_VM) ## a live Prometheus scrapes a live apmwatch audit in the lab (both kernels): alert, promtool check metrics, dashboard series
	@command -v prometheus >/dev/null || { echo "prom-test: prometheus missing: run make setup" >&2; exit 1; }
	@rm -rf $(PROM_BUILD)/extra && mkdir -p $(PROM_BUILD)/extra
	@cp $$(command -v prometheus) deploy/prometheus/apmwatch-rules.yaml deploy/prometheus/testdata/lab/* $(PROM_BUILD)/extra/
	@for k in $(LAB_KERNELS); do \
		$(MAKE) --no-print-directory lab-run KERNEL=$$k LAB_EXTRA=$(PROM_BUILD)/extra \
			CMD='sh /extra/e2e.sh' > $(PROM_BUILD)/out-$$k.txt || { cat $(PROM_BUILD)/out-$$k.txt; exit 1; }; \
	done
	APMWATCH_PROM_LAB="$(foreach k,$(LAB_KERNELS),$(PROM_BUILD)/out-$(k).txt)" \
		$(GO) test -count=1 -v -run '^TestLab$$' ./deploy/prometheus

prom-testdata: ## refresh deploy/prometheus/testdata/*.prom from the last make prom-test (6.12)
	@for b in scrape:audit-missed-rearm scrape-after:audit-resolved; do \
		awk -v b="$${b%%:*}" '$$0 == "=== BEGIN " b " ===" {p=1; next} $$0 == "=== END " b " ===" {p=0} p && NF' \
			$(PROM_BUILD)/out-6.12.txt > deploy/prometheus/testdata/$${b#*:}.prom; \
	done

# `make test` runs them too (prom-test in lab-suites' lanes).
test: prom-rules-test
