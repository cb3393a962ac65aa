# ccvm - build, test and benchmark.
#
#   make            build ./ccvm (and the vDSO and fastio library it embeds)
#   make test       install missing Debian packages, then the layer checks, unit tests,
#                   end-to-end tests, and both again under AddressSanitizer + UBSan
#                   (scripts/test.sh); the VM checks run on /dev/kvm, or where there
#                   is none in a KVM nested under QEMU's TCG (tests/e2e/suite.sh)
#   make demo       install missing packages, build, run the demo
#   make install    ccvm, the ccvm-oci link (the OCI runtime) and the man page into
#                   $(DESTDIR)$(PREFIX) (default /usr/local)
#   make coverage   the unit tests built with gcov: the share of the monitor's lines run
#   make fuzz       every libFuzzer target for FUZZ_SECONDS (default 60); make test
#                   runs each for 10 s
#   make bench      zipfbench natively vs in ccvm, syscall round trip; snapshot pause,
#                   duration, throughput timeline, restore time; CCoW sweep; Redis
#                   under snapshots; the engine's policies without a VM; ccvm beside
#                   QEMU's live snapshots; ccow's threshold against the cost model;
#                   snapshot storage: codecs, threads, restore (CSV + PNG)
#   QUICK=1 make bench-peers   one round of the peers on one workload (< 5 minutes)
#   make bench-migrate         live migration on loopback, ccvm beside QEMU (~35 minutes)
#   make bench-oci             ccvm-oci beside runc/crun/CRIU through podman (start, exec, checkpoint; ~15 minutes)
#   make bench-headline        every figure README states, at HEAD, 5 shuffled rounds, into
#                              bench/results/HOST-CLASS (60 minutes; QUICK=1: 15)

CC       ?= gcc
MUSLCC   ?= musl-gcc
OPT      ?= -O2 -g
WARN      = -Wall -Wextra -Werror
CPPFLAGS  = -D_GNU_SOURCE -Ibuild/gen
CFLAGS    = -std=gnu11 $(OPT) $(WARN) -pthread -MMD -MP
LDLIBS    = -lgnutls -ljansson -lxxhash -lzstd -llz4 -lseccomp -lcap -lm -pthread
SAN       = -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined

B         = build
SRCS      = $(wildcard oci/*.c vmm/*.c base/*.c vmm/kvm/*.c vmm/linux/*.c mmu/*.c snapshot/*.c)
LIB_SRCS  = $(filter-out vmm/main.c,$(SRCS))
OBJS      = $(SRCS:%.c=$(B)/obj/%.o) $(B)/obj/vdso_blob.o $(B)/obj/fastio_blob.o
ASAN_OBJS = $(SRCS:%.c=$(B)/asan/%.o) $(B)/obj/vdso_blob.o $(B)/obj/fastio_blob.o
GEN       = $(B)/gen/syscall_names.h

GUEST_TESTS = $(basename $(notdir $(wildcard guest/tests/*.c)))
GUEST_BINS  = $(B)/guest/zipfbench $(B)/guest/zipfbench.musl $(B)/guest/zipfbench.dyn \
	      $(foreach t,$(GUEST_TESTS),$(B)/guest/tests/$(t).glibc $(B)/guest/tests/$(t).musl \
	        $(B)/guest/tests/$(t).spie $(B)/guest/tests/$(t).dyn)

# The monitor in layers, each one folder and a static archive that may use only the
# layers after it (docs/architecture.md): ccvm is linked from them in this order, and
# `make layers` links each layer alone with the ones its entry names, so a call to any
# other layer is a link error.
LAYER_NAMES    = oci vmm linux kvm snapshot mmu base
LAYER_base     = $(wildcard base/*.c)
LAYER_mmu      = $(wildcard mmu/*.c)
LAYER_snapshot = $(wildcard snapshot/*.c)
LAYER_kvm      = $(wildcard vmm/kvm/*.c)
LAYER_linux    = $(wildcard vmm/linux/*.c)
LAYER_vmm      = $(filter-out vmm/main.c,$(wildcard vmm/*.c))
LAYER_oci      = $(wildcard oci/*.c)
LAYER_BLOBS_linux = $(B)/obj/vdso_blob.o $(B)/obj/fastio_blob.o
LAYER_LIBS     = $(LAYER_NAMES:%=$(B)/lib/libccvm-%.a)

UNIT_SRCS = $(wildcard tests/unit/*.c) bench/load.c
CHECK_LIBS = $(shell pkg-config --libs check 2>/dev/null || echo -lcheck)

# libFuzzer targets (clang): the monitor's parsers of what users, guests and image files
# hand it, each linked against the monitor's code built with coverage and ASan/UBSan.
FUZZ_CC      = clang
FUZZ_SAN     = -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_CFLAGS  = -std=gnu11 -O1 -g $(WARN) -Wno-gnu-variable-sized-type-not-at-end -pthread $(FUZZ_SAN)
FUZZ_TARGETS = $(basename $(notdir $(wildcard tests/fuzz/fuzz_*.c)))
FUZZ_OBJS    = $(LIB_SRCS:%.c=$(B)/fuzz/obj/%.o) $(B)/obj/vdso_blob.o $(B)/obj/fastio_blob.o
FUZZ_SECONDS ?= 60

.PHONY: all deps test results-check docs-check layers unit coverage install uninstall e2e asan asan-unit asan-e2e asan-e2e-start fuzz fuzz-build fuzz-quick bench bench-core bench-snapshots bench-ccow bench-redis bench-engine bench-datapath bench-storage bench-costs demo clean format guests bench-peers peer-guest bench-threshold bench-latency bench-migrate bench-headline bench-oci
all: ccvm bench/ycsb bench/engine-bench bench/cost-bench bench/codec-bench bench/tls-bench

ccvm: $(B)/obj/vmm/main.o $(LAYER_LIBS)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

define LAYER_RULE
$(B)/lib/libccvm-$(1).a: $(patsubst %.c,$(B)/obj/%.o,$(LAYER_$(1))) $(LAYER_BLOBS_$(1))
	@mkdir -p $$(dir $$@)
	rm -f $$@
	ar rcs $$@ $$^
endef
$(foreach l,$(LAYER_NAMES),$(eval $(call LAYER_RULE,$(l))))

# Each layer linked alone, whole, with exactly the layers its entry names; the include
# rules, and the include and call cycles (from nm), checked (scripts/check-layers.py).
layers: $(LAYER_LIBS)
	python3 tests/layers/test_check_layers.py
	scripts/check-layers.py --libs $(B)/lib

$(B)/ccvm-asan: $(ASAN_OBJS)
	$(CC) $(CFLAGS) $(SAN) -o $@ $^ $(LDLIBS)

$(B)/obj/%.o: %.c $(GEN)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

$(B)/asan/%.o: %.c $(GEN)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(SAN) -c -o $@ $<

# Names of x86-64 system calls, for stats and for logging unsupported ones.
$(GEN): /usr/include/x86_64-linux-gnu/asm/unistd_64.h
	@mkdir -p $(dir $@)
	{ echo '/* generated from asm/unistd_64.h by the Makefile */'; \
	  echo 'static const char *const lx_syscall_names[] = {'; \
	  sed -n 's/^#define __NR_\([a-z0-9_]*\)[ \t]\+\([0-9]\+\)$$/\t[\2] = "\1",/p' $<; \
	  echo '};'; } > $@

# The vDSO: freestanding, position independent, one PT_LOAD, embedded into ccvm.
VDSO_CFLAGS = -O2 -fPIC -fno-stack-protector -fno-builtin -ffreestanding -fcf-protection=none $(WARN)
$(B)/vdso.so: guest/vdso/vdso.c guest/vdso/vdso_abi.h guest/vdso/vdso.lds guest/vdso/vdso.map
	@mkdir -p $(B)
	$(CC) $(VDSO_CFLAGS) -c -o $(B)/vdso.o guest/vdso/vdso.c
	$(CC) -nostdlib -shared -Wl,--hash-style=both -Wl,-soname=linux-vdso.so.1 \
	  -Wl,--version-script=guest/vdso/vdso.map -Wl,-T,guest/vdso/vdso.lds -Wl,-Bsymbolic \
	  -Wl,--build-id=none -Wl,-z,max-page-size=4096 -o $@ $(B)/vdso.o
	@test $$(stat -c %s $@) -le 8192 || { echo "vDSO larger than 2 pages"; exit 1; }

$(B)/obj/vdso_blob.o: guest/vdso/blob.S $(B)/vdso.so
	@mkdir -p $(dir $@)
	$(CC) -c -DVDSO_SO='"$(B)/vdso.so"' -o $@ $<

# The exitless socket library the monitor preloads into dynamic glibc programs
# (guest/fastio/fastio_abi.h), embedded into ccvm.
$(B)/fastio.so: guest/fastio/fastio.c guest/fastio/fastio_abi.h
	@mkdir -p $(B)
	$(CC) -D_GNU_SOURCE -std=gnu11 -O2 -fPIC -shared -Wl,-z,now -Wl,--build-id=none $(WARN) \
	  -o $@ guest/fastio/fastio.c

$(B)/obj/fastio_blob.o: guest/fastio/blob.S $(B)/fastio.so
	@mkdir -p $(dir $@)
	$(CC) -c -DFASTIO_SO='"$(B)/fastio.so"' -o $@ $<

# Guest programs: static glibc, static-PIE glibc, static musl and dynamic glibc (PIE, run
# through ld-linux) builds of the same sources.
guests: $(GUEST_BINS)
$(B)/guest/zipfbench: guest/zipfbench.c guest/zipf.h
	@mkdir -p $(dir $@)
	$(CC) -O2 -static -pthread $(WARN) -o $@ $< -lm
$(B)/guest/zipfbench.dyn: guest/zipfbench.c guest/zipf.h
	@mkdir -p $(dir $@)
	$(CC) -O2 -pthread $(WARN) -o $@ $< -lm
$(B)/guest/zipfbench.musl: guest/zipfbench.c guest/zipf.h
	@mkdir -p $(dir $@)
	$(MUSLCC) -O2 -static -pthread $(WARN) -o $@ $< -lm
$(B)/guest/tests/%.glibc: guest/tests/%.c guest/tests/report.h
	@mkdir -p $(dir $@)
	$(CC) -O1 -static -D_GNU_SOURCE $(WARN) -Wno-error=unused-result -o $@ $<
$(B)/guest/tests/%.spie: guest/tests/%.c guest/tests/report.h
	@mkdir -p $(dir $@)
	$(CC) -O1 -static-pie -D_GNU_SOURCE $(WARN) -Wno-error=unused-result -o $@ $<
$(B)/guest/tests/%.dyn: guest/tests/%.c guest/tests/report.h
	@mkdir -p $(dir $@)
	$(CC) -O1 -D_GNU_SOURCE $(WARN) -Wno-error=unused-result -o $@ $<
$(B)/guest/tests/%.musl: guest/tests/%.c guest/tests/report.h
	@mkdir -p $(dir $@)
	$(MUSLCC) -O1 -static -D_GNU_SOURCE $(WARN) -o $@ $<

# Unit tests (Check), linked against the monitor's code without main().
$(B)/unit: $(UNIT_SRCS) $(LIB_SRCS:%.c=$(B)/obj/%.o) $(B)/obj/vdso_blob.o $(B)/obj/fastio_blob.o
	$(CC) $(CPPFLAGS) $(CFLAGS) -Itests/unit -o $@ $(filter %.c %.o,$^) $(LDLIBS) $(CHECK_LIBS)
# The e2e suite's reader of an image's memory (tests/e2e/imgmem.c), and its sender of an
# image as a migration stream (tests/e2e/imgstream.c), and its forger of an image that
# asks for every CPU feature (tests/e2e/imgcpu.c).
$(B)/imgmem $(B)/imgstream $(B)/imgcpu: $(B)/%: tests/e2e/%.c $(B)/lib/libccvm-snapshot.a $(B)/lib/libccvm-mmu.a $(B)/lib/libccvm-base.a
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ $(filter %.c %.a,$^) $(LDLIBS)
$(B)/unit-asan: $(UNIT_SRCS) $(LIB_SRCS:%.c=$(B)/asan/%.o) $(B)/obj/vdso_blob.o $(B)/obj/fastio_blob.o
	$(CC) $(CPPFLAGS) $(CFLAGS) $(SAN) -Itests/unit -o $@ $(filter %.c %.o,$^) $(LDLIBS) $(CHECK_LIBS)

$(B)/fuzz/obj/%.o: %.c $(GEN)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(CPPFLAGS) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c -o $@ $<

$(B)/fuzz/%: tests/fuzz/%.c $(FUZZ_OBJS)
	$(FUZZ_CC) $(CPPFLAGS) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_OBJS) $(LDLIBS)

# Coverage: the unit tests built with gcov, then the share of the monitor's lines
# (vmm/, mmu/, snapshot/) they executed.
COV_OBJS = $(LIB_SRCS:%.c=$(B)/cov/%.o)
$(B)/cov/%.o: %.c $(GEN)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -O0 --coverage -c -o $@ $<

$(B)/unit-cov: $(UNIT_SRCS) $(COV_OBJS) $(B)/obj/vdso_blob.o $(B)/obj/fastio_blob.o
	$(CC) $(CPPFLAGS) $(CFLAGS) --coverage -Itests/unit -o $@ $(filter %.c %.o,$^) $(LDLIBS) $(CHECK_LIBS)

# main.c is not in the unit tests, but it is the monitor's: counted, at 0%.
coverage: $(B)/unit-cov $(B)/cov/vmm/main.o
	find $(B)/cov -name '*.gcda' -delete
	$(B)/unit-cov
	scripts/coverage.sh $(B)/cov $(SRCS)

deps:
	@scripts/install-deps.sh

unit: $(B)/unit
	$(B)/unit

# The end-to-end suite on /dev/kvm, or nested under TCG where there is none.
e2e: ccvm guests bench/ycsb bench/engine-bench peer-guest $(B)/imgmem $(B)/imgstream $(B)/imgcpu
	tests/e2e/suite.sh ./ccvm

asan: asan-unit asan-e2e
asan-unit: $(B)/unit-asan
	ASAN_OPTIONS=detect_leaks=1 $(B)/unit-asan
asan-e2e: $(B)/ccvm-asan guests bench/ycsb bench/engine-bench peer-guest $(B)/imgmem $(B)/imgstream $(B)/imgcpu
	ASAN_OPTIONS=detect_leaks=1 tests/e2e/suite.sh --asan $(B)/ccvm-asan
# (make test, where the VMs run nested: asan-e2e's VM part starts in the background
# now, beside the plain pass, and asan-e2e awaits it; nothing on /dev/kvm.)
asan-e2e-start: $(B)/ccvm-asan guests bench/ycsb bench/engine-bench peer-guest $(B)/imgmem $(B)/imgstream
	ASAN_OPTIONS=detect_leaks=1 tests/e2e/suite.sh --asan --start $(B)/ccvm-asan

test: deps
	MAKE="$(MAKE)" scripts/test.sh

# Every current results file names its commit, CPU, cores, kernel, hypervisor, date,
# rounds and command (bench/provenance.py; history/ aside), and the check's own tests.
results-check:
	python3 tests/bench/test_provenance.py
	python3 bench/provenance.py check

# README's and evaluation.md's figure blocks equal a rendering of the newest headline run
# per host (bench/render.py --write makes them so), and the renderer's own tests.
docs-check:
	python3 tests/bench/test_render.py
	python3 tests/bench/test_headline.py
	python3 bench/render.py --check

fuzz-build: $(FUZZ_TARGETS:%=$(B)/fuzz/%)

# The instrumented objects are kept between runs (make would delete them as intermediates).
.SECONDARY: $(FUZZ_OBJS)

# Every target for FUZZ_SECONDS (default 60) from its committed seeds; fails on a finding.
fuzz: deps
	$(MAKE) fuzz-build
	tests/fuzz/run.sh $(FUZZ_SECONDS)

# What `make test` runs: every target for 10 seconds.
fuzz-quick: fuzz-build
	tests/fuzz/run.sh 10

bench: bench-core bench-snapshots bench-ccow bench-redis bench-engine bench-datapath bench-storage bench-costs bench-threshold bench-peers bench-migrate

# The YCSB load generator for Redis (hiredis); built next to its source as the issue
# names it.
bench/ycsb: bench/ycsb.c
	$(CC) $(CPPFLAGS) $(CFLAGS) $$(pkg-config --cflags hiredis) -o $@ $< $$(pkg-config --libs hiredis) -lm -pthread

# The snapshot engine on plain memory written by host threads: no VM needed.
bench/engine-bench: bench/engine-bench.c bench/load.c $(LIB_SRCS:%.c=$(B)/obj/%.o) $(B)/obj/vdso_blob.o $(B)/obj/fastio_blob.o
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ $(filter %.c %.o,$^) $(LDLIBS)

# Each codec's ratio and speed per block size on a dataset, one thread, no disk.
bench/codec-bench: bench/codec-bench.c bench/load.c $(LIB_SRCS:%.c=$(B)/obj/%.o) $(B)/obj/vdso_blob.o $(B)/obj/fastio_blob.o
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ $(filter %.c %.o,$^) $(LDLIBS)

# What TLS adds to a migration's transfer, no VM needed (bench/tls-cost.sh).
bench/tls-bench: bench/tls-bench.c $(LIB_SRCS:%.c=$(B)/obj/%.o) $(B)/obj/vdso_blob.o $(B)/obj/fastio_blob.o
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ $(filter %.c %.o,$^) $(LDLIBS)

# What a uffd trap, a kernel CoW fault and a region copy cost here, no VM needed.
bench/cost-bench: bench/cost-bench.c $(LIB_SRCS:%.c=$(B)/obj/%.o) $(B)/obj/vdso_blob.o $(B)/obj/fastio_blob.o
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ $(filter %.c %.o,$^) $(LDLIBS)

bench-core: deps
	$(MAKE) ccvm guests
	bench/run.sh

bench-snapshots: deps
	$(MAKE) ccvm guests
	bench/snapshots.sh

bench-ccow: deps
	$(MAKE) ccvm guests
	bench/ccow-sweep.sh

# The engine's policies on plain memory, no VM needed (bench/engine-sweep.sh).
bench-engine: deps
	$(MAKE) bench/engine-bench
	bench/engine-sweep.sh

# A writer's latency under snapshots on plain memory, traps made as dear as in a VM
# (bench/latency-sweep.py): the model of Redis under snapshots.
bench-latency: deps
	$(MAKE) bench/engine-bench
	bench/latency-sweep.py

# The snapshot data path's threads and priorities, its writer against dd and the 4 GiB
# pause (bench/datapath-sweep.py), no VM needed.
bench-datapath: deps
	$(MAKE) bench/engine-bench
	bench/datapath-sweep.py

# Snapshot storage: codecs, ratio, duration, restore, compressing threads, incremental
# snapshots; block size and level of the codec; no VM.
bench-storage: deps
	$(MAKE) bench/engine-bench bench/ycsb bench/codec-bench
	bench/storage/run.py
	bench/storage/blocks.py

# The per-page costs of the copy-on-write mechanisms (bench/costs.sh), no VM needed.
bench-costs: deps
	$(MAKE) bench/cost-bench
	bench/costs.sh

# ccow's threshold against the prediction from those costs, on the engine, no VM needed.
bench-threshold: deps
	$(MAKE) bench/engine-bench
	[ -f bench/results/$$(python3 bench/provenance.py class)/costs.csv ] || $(MAKE) bench-costs
	bench/threshold-sweep.py

# Redis serving in ccvm against natively; Redis under snapshots beside native BGSAVE.
bench-redis: deps
	$(MAKE) ccvm bench/ycsb
	bench/redis-snapshots
	bench/peers/redis.py
	bench/peers/table.py

# The QEMU peer's guest: zipfbench's loop on bare metal, booted by QEMU's multiboot
# loader (bench/peers/guest). Freestanding; math from musl's libc.a.
PEER_GUEST   = $(B)/peers/zipfguest.bin
PEER_CFLAGS  = -O2 -ffreestanding -fno-pic -fno-pie -mno-red-zone -fno-stack-protector \
	       -fno-asynchronous-unwind-tables $(WARN) -Iguest
PEER_LDFLAGS = -no-pie -static -nostartfiles -Wl,-T,bench/peers/guest/zipfguest.ld \
	       -Wl,--build-id=none -Wl,-z,noexecstack -Wl,--no-warn-rwx-segments
peer-guest: $(PEER_GUEST)
$(PEER_GUEST): bench/peers/guest/boot.S bench/peers/guest/zipfguest.c bench/peers/guest/zipfguest.ld guest/zipf.h
	@mkdir -p $(dir $@)
	$(MUSLCC) $(PEER_CFLAGS) $(PEER_LDFLAGS) -o $(@:.bin=.elf) $(filter %.S %.c,$^) -lm
	objcopy -O binary $(@:.bin=.elf) $@

# ccvm's policies beside QEMU's background-snapshot and pre-copy on zipfbench
# (bench/peers/peers.py); QUICK=1: one round, one workload.
bench-peers: deps
	$(MAKE) ccvm guests peer-guest
	bench/peers/peers.py
	[ -n "$(QUICK)" ] || bench/peers/table.py

# Live migration on loopback: ccvm's pre-copy (coverage and address order, stop and
# copy) beside QEMU's on zipfbench, and Redis under YCSB A (bench/migrate.py); QUICK=1: one
# round, small.
# ccvm-oci beside runc (and crun, runc with CRIU, where they run here) through podman:
# start-up, and Redis under YCSB-A through a live `podman container checkpoint -R`
# (bench/peers/oci.py; ~15 minutes).
bench-oci: deps
	$(MAKE) ccvm bench/ycsb
	bench/peers/oci.py

# Every figure README states, re-measured at HEAD on this machine in one run (60 min on
# a KVM host of ours; QUICK=1: a subset in 15), into bench/results/HOST-CLASS/.
bench-headline: deps
	$(MAKE) ccvm guests peer-guest bench/ycsb bench/engine-bench bench/codec-bench bench/cost-bench
	bench/headline.py

bench-migrate: deps
	$(MAKE) ccvm guests peer-guest
	$(MAKE) bench/ycsb
	bench/migrate.py

demo: deps
	$(MAKE) ccvm guests
	scripts/demo.sh

# The binary and its man page (PREFIX and DESTDIR as usual).
PREFIX ?= /usr/local
install: ccvm
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 0755 ccvm $(DESTDIR)$(PREFIX)/bin/ccvm
	ln -sf ccvm $(DESTDIR)$(PREFIX)/bin/ccvm-oci
	install -m 0644 ccvm.1 $(DESTDIR)$(PREFIX)/share/man/man1/ccvm.1

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/ccvm $(DESTDIR)$(PREFIX)/bin/ccvm-oci \
	  $(DESTDIR)$(PREFIX)/share/man/man1/ccvm.1

format:
	clang-format -i $(SRCS) $(wildcard vmm/*.h base/*.h vmm/kvm/*.h vmm/linux/*.h mmu/*.h snapshot/*.h guest/*.c guest/vdso/*.[ch] guest/fastio/*.[ch] guest/tests/*.c tests/unit/*.[ch])

clean:
	rm -rf $(B) ccvm

-include $(shell find $(B) -name '*.d' 2>/dev/null)
