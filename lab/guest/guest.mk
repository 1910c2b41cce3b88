# Guest tests: package ./lab/guest (build tag labguest), compiled on the host
# and run inside the lab guest by `make lab-test` as /usr/local/bin/guest.test.
.PHONY: lab-guest-test
lab-guest-test: ## build the guest test binary $(BUILD)/lab/guest.test
	@mkdir -p $(BUILD)/lab
	@if ls lab/guest/*_test.go >/dev/null 2>&1; then \
		CGO_ENABLED=0 $(GO) test -c -tags labguest -o $(BUILD)/lab/guest.test ./lab/guest; \
	else rm -f $(BUILD)/lab/guest.test; echo "lab-guest-test: lab/guest has no tests yet" >&2; fi
