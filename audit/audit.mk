# apmwatch audit: the soak benchmark. Included by the top-level Makefile.
# Not part of `make test`.
AUDIT_SOAK_KERNEL  ?= 6.12
AUDIT_SOAK_MINUTES ?= 5

.PHONY: audit-soak
audit-soak: ## soak apmwatch audit in the lab: QPs made and destroyed for AUDIT_SOAK_MINUTES, RSS sampled
	@LAB_TIMEOUT=$$(( $(AUDIT_SOAK_MINUTES) * 60 + 300 )) $(MAKE) --no-print-directory lab-run \
		KERNEL=$(AUDIT_SOAK_KERNEL) LAB_EXTRA=$(CURDIR)/audit/soak \
		CMD='sh /extra/soak.sh $(AUDIT_SOAK_MINUTES) 15 8'
