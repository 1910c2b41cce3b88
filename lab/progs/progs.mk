# Lab programs and the apmlab module (sources in lab/progs and lab/kmod).
# Included by lab/lab.mk. Outputs: $(BUILD)/lab/bin/lab-*, and
# $(BUILD)/lab/<kernel>/apmlab.ko and ibsim.ko (the simulated IB HCA) built
# against that kernel's Debian headers.

LAB_PROGS     := lab-inject lab-pair lab-cm-pair lab-ulp lab-lap lab-ib lab-ibpair lab-mpi lab-verbs
LAB_BIN       := $(abspath $(BUILD))/lab/bin
# LD_PRELOAD libraries for the lab (in the guest at /usr/local/bin too)
LAB_LIBS      := lab-altport.so
# The test suite's kernels, and KERNEL when it names another lab kernel.
LAB_KMOD_KS   := $(sort $(LAB_KERNELS) $(filter $(LAB_ALL_KERNELS),$(KERNEL)))
LAB_CC        ?= gcc
LAB_CFLAGS    := -O2 -g -Wall -Wextra -Werror -std=gnu11
PROGS_SRC     := lab/progs
KMOD_SRC      := $(wildcard lab/kmod/*.c lab/kmod/*.h) lab/kmod/Kbuild
IBSIM_SRC     := $(wildcard lab/ibsim/*.c lab/ibsim/*.h) lab/ibsim/Kbuild
PROGS_COMMON  := $(PROGS_SRC)/common.c $(PROGS_SRC)/common.h
PROGS_APM     := $(PROGS_SRC)/apm.c $(PROGS_SRC)/apm.h
# Open MPI's compile and link flags (libopenmpi-dev), asked only when lab-mpi builds.
LAB_MPI_FLAGS  = $(shell pkg-config --cflags --libs ompi-c)

.PHONY: lab-progs lab-kmod
lab-progs: $(addprefix $(LAB_BIN)/,$(LAB_PROGS) $(LAB_LIBS)) lab-kmod ## build the lab programs and the apmlab module (both kernels)
lab-kmod: $(foreach k,$(LAB_KMOD_KS),$(abspath $(BUILD))/lab/$(k)/apmlab.ko $(abspath $(BUILD))/lab/$(k)/ibsim.ko)

# $(call lab_prog,SOURCES,LIBS). Several makes may run in the same tree at
# the same time: write to a temporary name, then rename into place.
define lab_prog
	@mkdir -p $(LAB_BIN)
	@echo "  CC      $(@F)"
	@$(LAB_CC) $(LAB_CFLAGS) -o $@.tmp.$$$$ $(filter %.c,$(1)) $(2) && mv -f $@.tmp.$$$$ $@
endef

$(LAB_BIN)/lab-inject: $(PROGS_SRC)/lab-inject.c $(PROGS_COMMON)
	$(call lab_prog,$^,-libverbs)
$(LAB_BIN)/lab-ulp: $(PROGS_SRC)/lab-ulp.c $(PROGS_COMMON)
	$(call lab_prog,$^,-libverbs)
$(LAB_BIN)/lab-pair: $(PROGS_SRC)/lab-pair.c $(PROGS_APM) $(PROGS_COMMON)
	$(call lab_prog,$^,-libverbs)
$(LAB_BIN)/lab-cm-pair: $(PROGS_SRC)/lab-cm-pair.c $(PROGS_APM) $(PROGS_COMMON)
	$(call lab_prog,$^,-lrdmacm -libverbs)
$(LAB_BIN)/lab-lap: $(PROGS_SRC)/lab-lap.c $(PROGS_COMMON)
	$(call lab_prog,$^,-libumad -libverbs)
$(LAB_BIN)/lab-ib: $(PROGS_SRC)/lab-ib.c $(PROGS_COMMON)
	$(call lab_prog,$^,-libverbs)
$(LAB_BIN)/lab-ibpair: $(PROGS_SRC)/lab-ibpair.c $(PROGS_SRC)/uverbs.c $(PROGS_SRC)/uverbs.h $(PROGS_COMMON)
	$(call lab_prog,$^,-libverbs)
$(LAB_BIN)/lab-mpi: $(PROGS_SRC)/lab-mpi.c
	$(call lab_prog,$^,$(LAB_MPI_FLAGS))
$(LAB_BIN)/lab-verbs: $(PROGS_SRC)/lab-verbs.c
	$(call lab_prog,$^,-libverbs)
$(LAB_BIN)/lab-altport.so: $(PROGS_SRC)/lab-altport.c
	$(call lab_prog,$^,-shared -fPIC -ldl -libverbs)

# Kbuild writes next to the sources, so each kernel builds a copy in a
# private directory under BUILD (concurrent makes do not collide).
# $(call lab_kmod,NAME,SOURCES) builds NAME.ko for kernel $*: against the
# installed headers, or those setup unpacked into the cache for a kernel of
# another suite (with their make arguments, e.g. 5.10's compiler). 7.2's
# headers tree is a chroot of sid's toolchain (gcc-16, sid's glibc): the
# module builds inside it, in a private mount namespace with its own /proc.
define lab_kmod
	@kv=$$(lab/kver.sh $*) || exit 1; \
	hdr=/usr/src/linux-headers-$$kv; args=; cached=$(CACHE)/kernels/$*/headers; root=; \
	if [ -e $$cached/kver ]; then hdr=$$cached/usr/src/linux-headers-$$kv; args=$$(cat $$cached/make-args); fi; \
	if [ -e $$cached/chroot ]; then root=$$cached; fi; \
	[ -d $$hdr ] || { echo "lab-kmod: $$hdr missing: make setup KERNEL=$* fetches it" >&2; exit 1; }; \
	mkdir -p $(@D) && \
	if [ -n "$$root" ]; then out=$$(mktemp -d $$root/tmp/kmod-$*.XXXXXX); else out=$$(mktemp -d $(abspath $(BUILD))/lab/kmod-$*.XXXXXX); fi && \
	cp $(2) $$out/ && \
	{ if [ -n "$$root" ]; then \
		unshare --mount --fork sh -c "mount -t proc proc $$root/proc && exec chroot $$root make --no-print-directory -s -C /usr/src/linux-headers-$$kv M=$${out#$$root} $$args modules"; \
	  else $(MAKE) --no-print-directory -s -C $$hdr M=$$out $$args modules; fi 2>&1 | grep -v '^Skipping BTF generation' >&2; \
	  [ -e $$out/$(1).ko ]; } && \
	strip --strip-debug -o $@.tmp.$$$$ $$out/$(1).ko && mv -f $@.tmp.$$$$ $@ && \
	rm -rf $$out && echo "  KMOD    $* $(1).ko ($$kv)" || { rm -rf $$out; exit 1; }
endef

$(abspath $(BUILD))/lab/%/apmlab.ko: $(KMOD_SRC)
	$(call lab_kmod,apmlab,$(KMOD_SRC))
$(abspath $(BUILD))/lab/%/ibsim.ko: $(IBSIM_SRC)
	$(call lab_kmod,ibsim,$(IBSIM_SRC))
