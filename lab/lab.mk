# Lab targets (owned by lab/). Filled in by the lab work.
.PHONY: test demo lab-run lab-shell
test: unit ## every test: unit tests, then the lab on both kernels
demo: build ## boot the lab and show apmwatch at work
lab-run: ## boot a fresh guest: make lab-run KERNEL=6.1|6.12 CMD='...' [LAB_EXTRA=dir]
	@echo "lab-run: not built yet" >&2; exit 1
lab-shell: ## interactive shell in a fresh guest: make lab-shell KERNEL=6.1|6.12
	@echo "lab-shell: not built yet" >&2; exit 1
