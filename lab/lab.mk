# Lab targets: a qemu guest per Debian kernel with soft-RoCE.
# See docs/lab.md. Included by the top-level Makefile (CACHE, BUILD exported).

# LAB_KERNELS: what lab-test runs and a plain setup fetches; LAB_ALL_KERNELS
# are every kernel KERNEL may name (the others are fetched when named).
LAB_KERNELS := 6.1 6.12
LAB_ALL_KERNELS := 5.10 6.1 6.12 7.2
LAB_BENCH ?= .
KERNEL      ?= 6.12
LABVM       := $(BUILD)/lab/labvm
# Host-side lab checks run only where the lab is (make test sets it).
export APMWATCH_LAB ?=

# What the guest image holds besides apmwatch: lab-progs builds
# $(BUILD)/lab/bin/* and $(BUILD)/lab/<kernel>/*.ko; lab-guest-test builds
# $(BUILD)/lab/guest.test.
include lab/progs/progs.mk
include lab/guest/guest.mk
LAB_PREREQS := build lab-progs lab-guest-test lab-pkgroot
# The module builds against the headers that setup installs: keep the order under -j too.
lab-progs: setup

# Bad input fails at once, with one line, before anything is built.
ifneq ($(filter lab-assets lab-run lab-shell lab-core,$(MAKECMDGOALS)),)
ifeq ($(filter $(KERNEL),$(LAB_ALL_KERNELS)),)
$(error unknown KERNEL '$(KERNEL)': want one of $(LAB_ALL_KERNELS))
endif
endif
ifneq ($(filter lab-run,$(MAKECMDGOALS)),)
ifeq ($(strip $(CMD)),)
$(error lab-run needs a command: make lab-run KERNEL=$(KERNEL) CMD='shell command')
endif
endif

# The .deb as installed (dpkg-deb -x), for the guest test that starts its
# units under systemd; built again only when what goes into it changed (a
# digest of the binary and the packaging, docs and licence files), not at
# every lab-run.
PKGROOT_INPUTS = bin/apmwatch CHANGELOG.md README.md LICENSE $$(find deploy docs -type f | sort)
.PHONY: lab-pkgroot
lab-pkgroot: build
	@sum=$$(cat $(PKGROOT_INPUTS) | sha256sum | cut -d' ' -f1); stamp=$(BUILD)/lab/pkgroot.sha256; \
	if [ ! -d $(BUILD)/lab/pkgroot ] || [ "$$sum" != "$$(cat $$stamp 2>/dev/null)" ]; then \
		$(MAKE) --no-print-directory package && rm -rf $(BUILD)/lab/pkgroot && mkdir -p $(BUILD)/lab && \
		dpkg-deb -x $$(ls $(PKG_BUILD)/apmwatch_*_amd64.deb) $(BUILD)/lab/pkgroot && echo "$$sum" >$$stamp; \
	fi

.PHONY: setup lab-vm lab-assets lab-run lab-shell lab-core lab-test lab-storm lab-host-test lab-bench test demo

setup: ## install host packages and fetch the lab kernels: 6.1, 6.12, and KERNEL (root, Debian 12; idempotent)
	@LAB_KERNELS="$(LAB_KMOD_KS)" lab/setup-host.sh

lab-vm: ## build the lab runner $(BUILD)/lab/labvm
	@mkdir -p $(BUILD)/lab
	@CGO_ENABLED=0 $(GO) build -o $(LABVM) ./lab/vm/cmd/labvm

# LAB_VM=: do not rebuild the runner (lab-suites' lanes: a runner of
# another lane may be reading it).
LAB_VM ?= lab-vm
lab-assets: setup $(LAB_VM) $(LAB_PREREQS) ## build the guest initramfs for KERNEL (rebuilt when inputs change)
	@$(LABVM) assets -kernel $(KERNEL)

lab-run: lab-assets ## boot a fresh guest, run CMD: make lab-run KERNEL=5.10|6.1|6.12|7.2 CMD='...' [LAB_EXTRA=dir]
	@$(LABVM) run -kernel $(KERNEL) -cmd "$$LAB_CMD" -extra "$(LAB_EXTRA)" || { rc=$$?; echo "lab-run: command exited $$rc on $(KERNEL)" >&2; exit $$rc; }
lab-run: export LAB_CMD = $(value CMD)

lab-shell: lab-assets ## interactive shell in a fresh guest: make lab-shell KERNEL=5.10|6.1|6.12|7.2 (exit powers off)
	@$(LABVM) shell -kernel $(KERNEL) -extra "$(LAB_EXTRA)"

# LAB_TIMEOUT above the tests' own 35m (a suite side by side with another
# kernel's is slower), so a hung test dies with its goroutine dump. A guest
# that died of TCG's int3 oops resumes once (lab/suite-resume.sh).
lab-test: ## the guest tests (guest.test) on both kernels
	@failed=; for k in $(LAB_KERNELS); do \
		MAKE="$(MAKE)" lab/suite-resume.sh $$k '$(LAB_TEST_SKIP)' || failed="$$failed $$k"; \
	done; \
	[ -z "$$failed" ] || { echo "lab-test: guest tests FAILED on:$$failed" >&2; exit 1; }

# The packaged units under Debian's systemd as PID 1 (LAB_INIT=systemd: the
# guest's init script hands over to systemd, which runs the command as a
# service): the .deb as installed, each opt-in drop-in enabled.
LAB_SYSTEMD_TESTS := ^TestPackagedUnitsUnderSystemd$$
LAB_TEST_SKIP ?= $(LAB_SYSTEMD_TESTS)

# The enforcer's tests on ibsim, which failed now and then with three
# guests side by side on two cores (an action or a migration that did not
# come in time; the enforce storm's rearms of one side stuck; not yet
# understood) and never alone: lab-suites runs them after the lanes, one
# guest at a time, on 6.1 and 6.12, and on 7.2 the enforce storm of its
# core suite (the lanes skip it there too).
LAB_QUIET_TESTS := ^TestIBAuditEnforce|^TestIBStormEnforce
.PHONY: lab-quiet
lab-quiet: ## the enforcer's ibsim tests alone, on each of LAB_KERNELS
	@failed=; for k in $(LAB_KERNELS); do \
		tests='$(LAB_QUIET_TESTS)'; case $$k in 5.10|7.2) tests='^TestIBStormEnforce$$';; esac; \
		LAB_TIMEOUT=$${LAB_TIMEOUT:-900} $(MAKE) --no-print-directory lab-run KERNEL=$$k \
			CMD="guest.test -test.v -test.timeout 10m -test.run \"$$tests\"" || failed="$$failed $$k"; \
	done; \
	[ -z "$$failed" ] || { echo "lab-quiet: FAILED on:$$failed" >&2; exit 1; }
.PHONY: lab-systemd
lab-systemd: ## the packaged units (.deb) started by Debian's systemd as the guest's PID 1, on both kernels
	@failed=; for k in $(LAB_KERNELS); do \
		LAB_INIT=systemd LAB_TIMEOUT=$${LAB_TIMEOUT:-900} $(MAKE) --no-print-directory lab-run KERNEL=$$k \
			CMD='guest.test -test.v -test.timeout 10m -test.run "$(LAB_SYSTEMD_TESTS)"' || failed="$$failed $$k"; \
	done; \
	[ -z "$$failed" ] || { echo "lab-systemd: FAILED on:$$failed" >&2; exit 1; }

# The core suite: what a kernel must pass before the rest is worth running.
# apmwatch probes; a user and a kernel QP traced through a migration
# (RoCE with injected events, and ibsim's real retries); the InfiniBand
# matrix's core rows (correct owners, a missed rearm to an unprotected
# failure, the kernel ULP's behaviours); an actuator rearm; blind is an
# error, and external BTF sees. On 7.2 the storms too (where a late
# event once gave a false finding). make test runs it on 5.10 and 7.2.
LAB_CORE_NAMES := TestProbesCommand|TestTraceUserQP|TestTraceKernelULP|TestTraceIBSimUserPair|TestIBFindingsCorrectApplications|TestIBFindingsMissedRearmToUnprotectedFailure|TestIBFindingsKernelULP|TestActuatorRearmThroughBorrowedFile|TestBlindIsError|TestBTFDirSeesWithoutModuleBTF
LAB_CORE_TESTS := ^($(LAB_CORE_NAMES))$$
LAB_CORE_TESTS_7.2 := ^($(LAB_CORE_NAMES)|TestIBStorm|TestIBStormEnforce)$$
lab-core: ## the core guest tests on KERNEL (5.10|6.1|6.12|7.2): probes, traces through a migration, the IB matrix's core rows, an actuator rearm, blind is an error (7.2: and the storms)
	@LAB_TIMEOUT=$${LAB_TIMEOUT:-1680} $(MAKE) --no-print-directory lab-run KERNEL=$(KERNEL) \
		CMD='guest.test -test.v -test.timeout 25m -test.run "$(or $(LAB_CORE_TESTS_$(KERNEL)),$(LAB_CORE_TESTS))" -test.skip "$(LAB_TEST_SKIP)"'

# make test fetches the kernels of the other suites (5.10, 7.2: downloads
# and unpacking) in the background while the unit tests run; lab-suites
# waits for that fetch, and its log is shown then.
LAB_FETCH := $(BUILD)/lab/fetch
lab-fetch-start: setup
	@lab/fetch-bg.sh start $(LAB_FETCH) $(filter-out $(LAB_KERNELS),$(LAB_TEST_KERNELS))

# make test's guest runs, in three lanes side by side (lab/lanes.sh; a TCG
# guest keeps about one core busy and spends much of a suite waiting): the
# full suite on 6.1; the full suite on 6.12; the short boots (the packaged
# units, the lab runner's checks, Prometheus in the lab) on 6.1 and 6.12,
# then the core suites on 5.10 and 7.2 (the full suites take longest: the
# core suites ride beside them); then lab-quiet alone on 6.1, 6.12 and 7.2
# (the lanes skip its tests). Everything is
# built first, every kernel's image one at a time; the lanes build nothing
# (go build rewrites its output even when unchanged, under a runner of
# another lane that reads it).
LAB_TEST_KERNELS := $(LAB_ALL_KERNELS)
LAB_LANES := "lab-test:6.1" "lab-test:6.12" \
	"lab-systemd:6.1 lab-systemd:6.12 lab-host-test:6.1+6.12 prom-test:6.1+6.12 lab-core:5.10 lab-core:7.2"
.PHONY: lab-suites lab-fetch-start lab-mpi-minute
lab-suites: lab-guest-test lab-vm ## make test's guest runs: full suites and units on 6.1 and 6.12, core suites on 5.10 and 7.2, runner checks, Prometheus; three lanes side by side
	@lab/fetch-bg.sh wait $(LAB_FETCH)
	@for k in $(LAB_TEST_KERNELS); do $(MAKE) --no-print-directory lab-assets KERNEL=$$k || exit 1; done
	@rm -f $(BUILD)/lab/logs/failed; export BUILD=$(BUILD); \
	MAKE="$(MAKE)" LANE_ARGS="LAB_PREREQS= LAB_VM= LAB_TEST_SKIP=^TestPackagedUnitsUnderSystemd|$(LAB_QUIET_TESTS)" lab/lanes.sh $(LAB_LANES); rc=$$?; \
	MAKE="$(MAKE)" LANE_ARGS="LAB_PREREQS= LAB_VM=" lab/lanes.sh "lab-quiet:6.1+6.12+7.2" || rc=1; \
	lab/lanes.sh --report; exit $$rc

# Open MPI's scenarios (docs/lab.md, "Open MPI's APM, observed") with
# jobs of a minute, the path failing half way: make test runs them with
# jobs of seconds.
MPI_SECONDS ?= 60
lab-mpi-minute: lab-guest-test ## Open MPI's APM scenarios with MPI_SECONDS-long jobs (60), on both kernels
	@for k in $(LAB_KERNELS); do \
		LAB_TIMEOUT=$${LAB_TIMEOUT:-1800} $(MAKE) --no-print-directory lab-run KERNEL=$$k \
			CMD='APMWATCH_MPI_SECONDS=$(MPI_SECONDS) guest.test -test.v -test.timeout 25m -test.run "^TestIBSimOpenMPI"' || exit 1; \
	done

# The storms at full size (STORM_PAIRS pairs: 4,000 QPs by default; lab-test
# runs 500): minutes of lab time, figures in docs/performance.md.
STORM_PAIRS ?= 2000
lab-storm: lab-guest-test ## the port-failure storms (audit, trace, audit --enforce) at STORM_PAIRS pairs, on both kernels (a measurement)
	@for k in $(LAB_KERNELS); do \
		LAB_TIMEOUT=$${LAB_TIMEOUT:-2400} $(MAKE) --no-print-directory lab-run KERNEL=$$k \
			CMD='APMWATCH_STORM_PAIRS=$(STORM_PAIRS) guest.test -test.v -test.timeout 35m -test.run "^TestIBStorm"' || exit 1; \
	done

lab-host-test: $(LAB_VM) ## host-side checks of the lab runner (boots both kernels; root)
	@for k in $(LAB_KERNELS); do $(MAKE) --no-print-directory lab-assets KERNEL=$$k || exit 1; done
	APMWATCH_LAB=1 $(GO) test -count=1 -v ./lab/vm/

test: setup lab-fetch-start unit lint lab-suites ## every test: unit, lint, guest suites (full on 6.1 and 6.12, core on 5.10 and 7.2), lab runner checks, Prometheus in the lab

demo: setup build ## boot the 6.12 lab: two simulated InfiniBand HCAs through port failures (a correct and a never-rearm application, unprotected failure, the actuator), then the RoCE half
	@$(MAKE) --no-print-directory lab-run KERNEL=6.12 CMD='sh /usr/local/share/lab/demo.sh'

# bpftrace (Debian's, with its libraries) goes into the guest for this only,
# as LAB_EXTRA: lab/bpftrace-tree.sh fetches it into the cache.
# BASELINE=rev adds that revision's apmwatch as a column (lab/bench-baseline.sh).
lab-bench: lab-guest-test ## lab benchmarks (probe cost on the modify, QP event and CM paths, against an empty program, bpftrace and BASELINE=rev) on both kernels; figures in docs/performance.md
	@tree=$$(lab/bpftrace-tree.sh) || exit 1; env=; \
	if [ -n "$(BASELINE)" ]; then \
		tree=$$(lab/bench-baseline.sh "$(BASELINE)" "$$tree") || exit 1; \
		env=APMWATCH_BENCH_BASELINE=/extra/bin/apmwatch-baseline; \
	fi; \
	for k in $(LAB_KERNELS); do \
		$(MAKE) --no-print-directory lab-run KERNEL=$$k LAB_EXTRA=$$tree \
			CMD="$$env guest.test -test.run '^$$' -test.bench '$(LAB_BENCH)' -test.benchtime 1x -test.v" || exit 1; \
	done
