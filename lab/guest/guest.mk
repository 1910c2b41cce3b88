# Guest tests: package ./lab/guest (build tag labguest), compiled on the host
# and run inside the lab guest by `make lab-test` as /usr/local/bin/guest.test.
.PHONY: lab-guest-test
lab-guest-test: ## build the guest test binary $(BUILD)/lab/guest.test
	@mkdir -p $(BUILD)/lab
	CGO_ENABLED=0 $(GO) test -c -tags labguest -o $(BUILD)/lab/guest.test ./lab/guest
