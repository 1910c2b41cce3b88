# Deployment targets (owned by deploy/). Included by the top-level Makefile.

.PHONY: daemonset
daemonset: ## render the DaemonSet, image pinned by digest: make daemonset IMAGE=name@sha256:<digest> [METRICS=loopback|node]
	@mkdir -p $(BUILD)/deploy
	@deploy/render.sh '$(IMAGE)' '$(or $(METRICS),loopback)' > $(BUILD)/deploy/apmwatch-audit-daemonset.yaml.tmp
	@mv $(BUILD)/deploy/apmwatch-audit-daemonset.yaml.tmp $(BUILD)/deploy/apmwatch-audit-daemonset.yaml
	@echo "wrote $(BUILD)/deploy/apmwatch-audit-daemonset.yaml (kubectl apply -f it)"
