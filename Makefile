# kproxy: a Kubernetes service proxy in C.
#
#   make            build build/kproxy (naming any missing build dependency; make deps installs them)
#   make deps       install the build and test dependencies (Debian packages, apt-get; root)
#   make check      install build dependencies, build, run every test (also under ASan/UBSan)
#   make image      build/kproxy-image.tar: the Dockerfile's image, from Debian's packages, without Docker
#   make demo       install build dependencies, build, run the bundled example
#                   (PROXY_MODE=nftables for nftables mode, userspace for userspace mode)
#   make bench      optimised build and benchmarks (bench/RESULTS.md, bench/plots/)
#   make profile    build-prof/kproxy with frame pointers for perf (PG=1: gprof's -pg)
#   make bench-compare BASE=rev   the daemon benchmark of rev and of the tree, alternated
#   make soak       churn soak: 10 min of API writes per mode at 10k services, kernel checked after
#
# Out-of-tree builds: BUILD=dir. SANITIZE=1 builds with ASan and UBSan.

BUILD    ?= build
CC       ?= cc
PKG_CONFIG ?= pkg-config
# The libraries, as pkg-config module:Debian package (build-deps names the package).
PKG_DEBS := jansson:libjansson-dev yaml-0.1:libyaml-dev libcrypto:libssl-dev libcurl:libcurl4-openssl-dev \
            libmicrohttpd:libmicrohttpd-dev libnetfilter_conntrack:libnetfilter-conntrack-dev libmnl:libmnl-dev \
            libbpf:libbpf-dev
PKGS     := $(foreach m,$(PKG_DEBS),$(firstword $(subst :, ,$(m))))
WARN     := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2 \
            -Wno-missing-field-initializers -Werror
OPT      ?= -O2 -g
CFLAGS   += -std=gnu11 $(OPT) $(WARN) -D_GNU_SOURCE -Isrc -Ibuild-gen $(shell $(PKG_CONFIG) --cflags $(PKGS) 2>/dev/null)
LDLIBS   += $(shell $(PKG_CONFIG) --libs $(PKGS) 2>/dev/null) -lm
VERSION  := $(shell cat VERSION 2>/dev/null || echo 0.0.0)
CFLAGS   += -DKPROXY_VERSION='"$(VERSION)"'

ifeq ($(SANITIZE),1)
CFLAGS   += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
LDFLAGS  += -fsanitize=address,undefined
endif

CORE_SRC := $(sort $(wildcard src/util/*.c src/config/*.c src/kube/*.c src/model/*.c src/ev/*.c src/http/*.c src/daemon/*.c src/proxy/*.c src/proxy/*/*.c \
                               src/render/*.c src/apply/*.c src/host/*.c \
                               src/userspace/*.c src/explain/*.c src/trace/*.c src/cli/*.c src/sockbpf/sockbpf.c src/sockbpf/udpreap.c))
CORE_OBJ := $(CORE_SRC:%.c=$(BUILD)/%.o)
MAIN_OBJ := $(BUILD)/src/main.o
# tests/unit/ mirrors src/: a module's test is beside where its source is
# (tests/unit/proxy/nftables/test-nftsync.c for src/proxy/nftables/nftsync.c);
# the programs are flat, build/tests/test-<name>, names unique.
UNIT_SRC := $(sort $(wildcard tests/unit/*/test-*.c tests/unit/*/*/test-*.c))
UNIT_BIN := $(foreach s,$(UNIT_SRC),$(BUILD)/tests/$(basename $(notdir $(s))))
# What the unit tests share besides the harness (tests/unit/*.c that are
# not tests: nft-fake.c, an in-memory nf_tables), in a library of their own.
TEST_LIB_SRC := $(sort $(filter-out $(UNIT_SRC),$(wildcard tests/unit/*.c)))
TEST_LIB_OBJ := $(TEST_LIB_SRC:%.c=$(BUILD)/%.o)

all: $(BUILD)/kproxy

# What the build lacks, named as Debian packages, before any compiler error
# about a missing header (an order-only prerequisite: checked once a run).
BUILD_TOOLS := $(PKG_CONFIG):pkg-config $(CC):build-essential clang:clang
build-deps:
	@missing=""; \
	for t in $(BUILD_TOOLS); do command -v "$${t%%:*}" >/dev/null 2>&1 || missing="$$missing $${t#*:}"; done; \
	command -v "$(BPFTOOL)" >/dev/null 2>&1 || missing="$$missing bpftool"; \
	for m in $(PKG_DEBS); do $(PKG_CONFIG) --exists "$${m%%:*}" 2>/dev/null || missing="$$missing $${m#*:}"; done; \
	if [ -n "$$missing" ]; then \
	    echo "kproxy's build needs these Debian packages, missing here:$$missing"; \
	    echo "install them with: make deps (as root), or apt-get install$$missing"; \
	    exit 1; \
	fi

$(BUILD)/%.o: %.c | build-deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c -o $@ $<

$(BUILD)/libkproxy-core.a: $(CORE_OBJ)
	@rm -f $@
	$(AR) rcs $@ $^

$(BUILD)/kproxy: $(MAIN_OBJ) $(BUILD)/libkproxy-core.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# Socket load balancing's programs (src/sockbpf/sock.bpf.c), compiled to
# BPF with clang and embedded as a libbpf skeleton, generated once for
# every build directory (the fuzz build's too).
GEN      := build-gen
BPFTOOL  ?= $(shell command -v bpftool 2>/dev/null || echo /usr/sbin/bpftool)

$(GEN)/sock.bpf.o: src/sockbpf/sock.bpf.c src/sockbpf/maps.h | build-deps
	@mkdir -p $(dir $@)
	clang -O2 -g -Wall -Werror -target bpf -Isrc -I/usr/include/$(shell uname -m)-linux-gnu -c -o $@ $<

$(GEN)/sock.skel.h: $(GEN)/sock.bpf.o
	$(BPFTOOL) gen skeleton $< name sock > $@.tmp && mv $@.tmp $@

$(BUILD)/src/sockbpf/sockbpf.o build-fuzz/obj/src/sockbpf/sockbpf.o: $(GEN)/sock.skel.h

$(BUILD)/libkproxy-test.a: $(TEST_LIB_OBJ)
	@rm -f $@
	$(AR) rcs $@ $^

# The tests' own helpers (tests/unit/*.h) by their names.
$(BUILD)/tests/unit/%.o: CFLAGS += -Itests/unit

define UNIT_PROGRAM
$(BUILD)/tests/$(basename $(notdir $(1))): $(BUILD)/$(1:.c=.o) $(BUILD)/libkproxy-test.a $(BUILD)/libkproxy-core.a
endef
$(foreach s,$(UNIT_SRC),$(eval $(call UNIT_PROGRAM,$(s))))

$(UNIT_BIN):
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

unit: $(UNIT_BIN)

# Debian packages the build and the tests need. Installs only what is missing.
DEB_BUILD := build-essential pkg-config libjansson-dev libyaml-dev libssl-dev libcurl4-openssl-dev \
             libmicrohttpd-dev libnetfilter-conntrack-dev libmnl-dev clang libclang-rt-14-dev libbpf-dev bpftool
DEB_TEST  := iptables nftables iproute2 nfacct conntrack curl openssl python3 python3-yaml mmdebstrap podman
# $(call apt_missing,PACKAGES): installs those of PACKAGES that are not installed.
apt_missing = missing=$$(for p in $(1); do \
	    dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	    echo "installing:" $$missing; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi
deps:
	@$(call apt_missing,$(DEB_BUILD) $(DEB_TEST))

check: deps
	$(MAKE) all unit image
	tests/run-all.sh $(BUILD)
	$(MAKE) BUILD=build-asan SANITIZE=1 OPT="-O1 -g" all unit
	KPROXY_SKIP_JSON_E2E=1 tests/run-all.sh build-asan
	$(MAKE) fuzz

# libFuzzer harnesses, one per parser (tests/fuzz/README.md): clang, the
# core built once for them with the fuzzer's coverage, ASan and UBSan.
# `make fuzz` runs each for FUZZ_SECONDS from its corpus (a short run, in
# make check); `make fuzz-long FUZZ_SECONDS=N` runs each for N seconds
# (default an hour), one after the other, niced. Any crash, leak, timeout
# or sanitizer report fails the run and leaves its input in build-fuzz/.
FUZZ_SECONDS ?= 6
fuzz-long: FUZZ_SECONDS = 3600
FUZZ_CFLAGS := -std=gnu11 -g -O1 $(WARN) -D_GNU_SOURCE -DKPROXY_VERSION='"fuzz"' -Isrc -Ibuild-gen \
               $(shell $(PKG_CONFIG) --cflags $(PKGS) 2>/dev/null) -fno-omit-frame-pointer \
               -fsanitize=address,undefined -fno-sanitize-recover=all
FUZZ_OBJ := $(CORE_SRC:%.c=build-fuzz/obj/%.o)
FUZZ_HELPER_SRC := $(filter-out tests/fuzz/fuzz-%.c,$(wildcard tests/fuzz/*.c))
FUZZ_HELPER_OBJ := $(FUZZ_HELPER_SRC:%.c=build-fuzz/obj/%.o)
FUZZ_NAMES := $(sort $(patsubst tests/fuzz/fuzz-%.c,%,$(wildcard tests/fuzz/fuzz-*.c)))
FUZZ_BIN := $(FUZZ_NAMES:%=build-fuzz/fuzz-%)

build-fuzz/obj/%.o: %.c
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c -o $@ $<

build-fuzz/libkproxy-fuzz.a: $(FUZZ_OBJ) $(FUZZ_HELPER_OBJ)
	@rm -f $@
	$(AR) rcs $@ $^

# A harness that includes a file for its static readers defines that
# file's symbols itself, so the archive's copy is never pulled in.
build-fuzz/fuzz-%: tests/fuzz/fuzz-%.c build-fuzz/libkproxy-fuzz.a
	clang $(FUZZ_CFLAGS) -fsanitize=fuzzer -MMD -MP -o $@ $< build-fuzz/libkproxy-fuzz.a $(LDLIBS)

fuzz-build: $(FUZZ_BIN)

fuzz: fuzz-build
	tests/fuzz/run.sh build-fuzz $(FUZZ_SECONDS) $(FUZZ_NAMES)

fuzz-long: fuzz-build
	nice tests/fuzz/run.sh build-fuzz $(FUZZ_SECONDS) $(FUZZ_NAMES)

# Rewrites the seeds (tests/fuzz/corpus/*/seed-*) from the goldens and,
# for nf_tables, from what the unit tests' in-memory kernel answers.
$(BUILD)/tests/seeds-nft: tests/fuzz/seeds/seeds-nft.c tests/fuzz/nft-readers.c $(BUILD)/libkproxy-test.a \
                          $(BUILD)/libkproxy-core.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests/fuzz $(LDFLAGS) -o $@ $^ $(LDLIBS)
fuzz-seeds: $(BUILD)/tests/seeds-nft
	rm -f tests/fuzz/corpus/nft-dump/seed-* tests/fuzz/corpus/nft-digest/seed-*
	$(BUILD)/tests/seeds-nft tests/fuzz/corpus
	tests/fuzz/seeds.py

# kproxy's image without a Docker daemon or a registry (tools/image.py,
# docs/deploy.md): mmdebstrap makes the Dockerfile's runtime stage from
# Debian's packages, and the stripped binary goes in; written as an OCI
# image archive for docker load, podman load or ctr import. Reproducible
# (SOURCE_DATE_EPOCH: the last commit's time).
IMAGE := $(BUILD)/kproxy-image.tar
image: $(IMAGE)
$(IMAGE): $(BUILD)/kproxy Dockerfile tools/image.py tools/dockerfile.py
	@$(call apt_missing,mmdebstrap)
	tools/image.py --binary $(BUILD)/kproxy --version $(VERSION) --out $@

demo: deps
	$(MAKE) all
	examples/demo.sh $(BUILD) $(PROXY_MODE)

bench: deps bench-deps
	$(MAKE) BUILD=build-bench OPT="-O2 -g -DNDEBUG" all build-bench/bench-render build-bench/bench-nftsync build-bench/bench-socklb build-bench/bench-wire bench-tools
	bench/run.sh build-bench $(BENCH_SIZES) $(BENCH_XL)
	bench/programming.py --json bench/results.json build-bench $(BENCH_PROG_SIZES) $(BENCH_XL)
	bench/userspace.py build-bench $(BENCH_USERSPACE_SIZES)
	bench/socketlb.py build-bench $(BENCH_SOCKET_LB_SIZES)
	bench/trace_overhead.py build-bench
	bench/wire.py --json bench/wire.json build-bench $(BENCH_WIRE_SIZES)
	bench/plot.py bench/results.json bench/plots

# JSON against protobuf on the wire (bench/wire.py): list and watch bytes,
# the client's CPU to read them, a fleet on paper; loopback only.
BENCH_WIRE_SIZES ?= 10000 100000
bench-wire: deps
	$(MAKE) BUILD=build-bench OPT="-O2 -g -DNDEBUG" all build-bench/bench-wire
	bench/wire.py --json bench/wire.json build-bench $(BENCH_WIRE_SIZES)

# protobuf-c against kproxy's own protobuf reader (bench/protobuf-c/README.md).
bench-protobuf-c: deps
	@$(call apt_missing,protobuf-c-compiler libprotobuf-c-dev)
	$(MAKE) BUILD=build-bench OPT="-O2 -g -DNDEBUG" all
	bench/protobuf-c/run.sh build-bench

# Only userspace mode beside nftables mode (bench/userspace.py): connections/s,
# throughput, kproxy's CPU per GB at 1 and 20k services.
bench-userspace: deps bench-deps
	$(MAKE) BUILD=build-bench OPT="-O2 -g -DNDEBUG" all bench-tools
	bench/userspace.py build-bench $(BENCH_USERSPACE_SIZES)

# --socket-lb beside nftables mode alone (bench/socketlb.py): change
# latency, cold start, connections/s, RSS at 1 and 20k services; the maps'
# cold start at 20k and 100k (bench-socklb).
bench-socket-lb: deps bench-deps
	$(MAKE) BUILD=build-bench OPT="-O2 -g -DNDEBUG" all build-bench/bench-socklb bench-tools
	bench/socketlb.py build-bench $(BENCH_SOCKET_LB_SIZES)

# What only the benchmarks need: gnuplot for the plots, perf for --perf.
DEB_BENCH := gnuplot-nox linux-perf time
bench-deps:
	@$(call apt_missing,$(DEB_BENCH))

# Profiling builds: build-prof keeps frame pointers for `perf record -g`
# (perf report shows whole call chains); PG=1 adds gprof's -pg.
profile:
	$(MAKE) BUILD=build-prof OPT="-O2 -g -fno-omit-frame-pointer -DNDEBUG" all
ifeq ($(PG),1)
CFLAGS   += -pg
LDFLAGS  += -pg
endif

# Only the daemon benchmark (bench/programming.py): first load, one-endpoint
# change latency, packet path. Both modes; BENCH_MODES=nftables for one.
bench-programming: deps bench-deps
	$(MAKE) BUILD=build-bench OPT="-O2 -g -DNDEBUG" all bench-tools
	bench/programming.py --json bench/results.json build-bench $(BENCH_PROG_SIZES) $(BENCH_XL)
	bench/plot.py bench/results.json bench/plots

# Before and after in one run: the daemon benchmark of BASE (a git
# revision) and of the working tree, alternated (bench/compare.sh).
bench-compare: deps bench-deps
	@test -n "$(BASE)" || { echo "usage: make bench-compare BASE=<revision> [BENCH_COMPARE_SIZES=...]"; exit 2; }
	bench/compare.sh $(BASE) $(BENCH_COMPARE_SIZES)

# The churn soak (bench/soak.py; not in make check): SOAK_MINUTES of API
# writes per mode against SOAK_SERVICES services, then the kernel against a
# fresh render of the final state, RSS and fds flat.
SOAK_MINUTES ?= 10
SOAK_SERVICES ?= 10000
soak: deps bench-deps
	$(MAKE) BUILD=build-bench OPT="-O2 -g -DNDEBUG" all bench-tools
	bench/soak.py --minutes $(SOAK_MINUTES) --services $(SOAK_SERVICES) --json bench/soak.json build-bench

BENCH_SIZES ?= 1000 10000 50000
# The daemon benchmark's sizes: BENCH_PROG_SIZES, else BENCH_SIZES if given, else these.
BENCH_PROG_SIZES ?= $(if $(filter command line environment,$(origin BENCH_SIZES)),$(BENCH_SIZES),1000 10000 20000 50000)
# BENCH_100K=1 adds 100k services to both (nftables mode with 16 shards
# there, no kernel floor, no iptables mode: see bench/README.md).
BENCH_XL := $(if $(filter 1,$(BENCH_100K)),100000)
$(BUILD)/bench-render: $(BUILD)/bench/bench-render.o $(BUILD)/libkproxy-core.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
$(BUILD)/bench-socklb: $(BUILD)/bench/bench-socklb.o $(BUILD)/libkproxy-core.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
$(BUILD)/bench-nftsync: $(BUILD)/bench/bench-nftsync.o $(BUILD)/libkproxy-core.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
$(BUILD)/bench-wire: $(BUILD)/bench/bench-wire.o $(BUILD)/libkproxy-core.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
BENCH_TOOLS := $(BUILD)/bench/nftprobe $(BUILD)/bench/dp_client $(BUILD)/bench/dp_server $(BUILD)/bench/bulk
bench-tools: $(BENCH_TOOLS)
$(BUILD)/bench/bulk: tests/netns/bulk.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -pthread -o $@ $<
$(BUILD)/bench/nftprobe: bench/nftprobe.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< -lmnl
$(BUILD)/bench/dp_%: bench/dp_%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $<

# Installing on a host without containers (docs/deploy.md): the binary, a
# kube-proxy link to it, the systemd unit, kproxy(8) made from --help, and
# the ConfigMap's config.conf as an example (reading /etc/kproxy/kubeconfig.conf).
# DESTDIR stages the tree.
# The kube-proxy link lets scripts and units written for kube-proxy run
# kproxy unchanged; it is never put over a file that is not ours, and
# uninstall removes it only if it still points at kproxy.
PREFIX   ?= /usr/local
DESTDIR  ?=
BINDIR   ?= $(PREFIX)/bin
MANDIR   ?= $(PREFIX)/share/man
DATADIR  ?= $(PREFIX)/share/kproxy
UNITDIR  ?= $(PREFIX)/lib/systemd/system
install: $(BUILD)/kproxy
	install -D -m 0755 $(BUILD)/kproxy $(DESTDIR)$(BINDIR)/kproxy
	@link=$(DESTDIR)$(BINDIR)/kube-proxy; \
	if [ -e "$$link" ] && [ "$$(readlink "$$link")" != kproxy ]; then \
	    echo "install: $$link exists and is not kproxy's link; left alone"; \
	else ln -sfn kproxy "$$link" && echo "ln -s kproxy $$link"; fi
	@mkdir -p $(DESTDIR)$(UNITDIR)
	sed 's|@BINDIR@|$(BINDIR)|g' deploy/kproxy.service > $(DESTDIR)$(UNITDIR)/kproxy.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/kproxy.service
	@mkdir -p $(DESTDIR)$(MANDIR)/man8
	deploy/manpage.sh $(BUILD)/kproxy $(VERSION) > $(DESTDIR)$(MANDIR)/man8/kproxy.8
	@mkdir -p $(DESTDIR)$(DATADIR)
	sed -n -e '/^  config.conf: |-$$/,/^  [^ ]/{' -e 's|/var/lib/kube-proxy/kubeconfig.conf|/etc/kproxy/kubeconfig.conf|' \
	    -e 's/^    //p' -e '}' deploy/kube-proxy.yaml > $(DESTDIR)$(DATADIR)/config.conf.example

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/kproxy $(DESTDIR)$(UNITDIR)/kproxy.service $(DESTDIR)$(MANDIR)/man8/kproxy.8 \
	    $(DESTDIR)$(DATADIR)/config.conf.example
	@link=$(DESTDIR)$(BINDIR)/kube-proxy; \
	if [ -L "$$link" ] && [ "$$(readlink "$$link")" = kproxy ]; then rm -f "$$link" && echo "rm -f $$link"; fi
	@rmdir $(DESTDIR)$(DATADIR) 2>/dev/null || true

clean:
	rm -rf build build-asan build-bench build-fuzz build-prof build-gen

.PHONY: all build-deps unit deps check image demo soak bench bench-wire bench-protobuf-c bench-compare bench-deps bench-programming bench-tools bench-userspace \
        bench-socket-lb clean fuzz fuzz-build \
        fuzz-long fuzz-seeds profile install uninstall
-include $(CORE_OBJ:.o=.d) $(MAIN_OBJ:.o=.d) $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/unit/%.d) $(TEST_LIB_OBJ:.o=.d) \
         $(BUILD)/bench/bench-render.d $(BUILD)/bench/bench-nftsync.d $(BUILD)/bench/bench-socklb.d $(FUZZ_OBJ:.o=.d) $(FUZZ_HELPER_OBJ:.o=.d) \
         $(FUZZ_BIN:%=%.d)
