# apmwatch audit: the soak benchmark. Included by the top-level Makefile.
# Not part of `make test`.
AUDIT_SOAK_KERNEL  ?= 6.12
AUDIT_SOAK_MINUTES ?= 5
# A port-failure storm on ibsim every AUDIT_SOAK_STORM_EVERY seconds with
# AUDIT_SOAK_STORM_PAIRS never-rearm pairs; a heap profile at
# AUDIT_SOAK_HEAP_AT seconds and at the end.
AUDIT_SOAK_STORM_EVERY ?= 240
AUDIT_SOAK_STORM_PAIRS ?= 100
AUDIT_SOAK_HEAP_AT     ?= 300
# RSS and the memory's parts sampled every AUDIT_SOAK_SAMPLE seconds
AUDIT_SOAK_SAMPLE      ?= 5
AUDIT_SOAK_OUT         ?= $(BUILD)/soak/$(AUDIT_SOAK_KERNEL)

.PHONY: audit-soak
audit-soak: ## soak apmwatch audit in the lab (QP churn, ibsim storms) for AUDIT_SOAK_MINUTES; RSS slope and heap diff in AUDIT_SOAK_OUT
	@mkdir -p $(AUDIT_SOAK_OUT)
	@{ LAB_TIMEOUT=$$(( $(AUDIT_SOAK_MINUTES) * 60 + 600 )) $(MAKE) --no-print-directory lab-run \
		KERNEL=$(AUDIT_SOAK_KERNEL) LAB_EXTRA=$(CURDIR)/audit/soak \
		CMD='sh /extra/soak.sh $(AUDIT_SOAK_MINUTES) $(AUDIT_SOAK_SAMPLE) 8 $(AUDIT_SOAK_STORM_EVERY) $(AUDIT_SOAK_STORM_PAIRS) $(AUDIT_SOAK_HEAP_AT)'; \
		echo $$? >$(AUDIT_SOAK_OUT)/rc; } 2>&1 | tee $(AUDIT_SOAK_OUT)/run.log
	@[ "$$(cat $(AUDIT_SOAK_OUT)/rc)" = 0 ] || { echo "audit-soak: the lab run failed on $(AUDIT_SOAK_KERNEL)" >&2; exit 1; }
	@audit/soak/analyze.sh $(AUDIT_SOAK_OUT)/run.log $(AUDIT_SOAK_OUT)
