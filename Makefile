# synth: build, generate, test. Run as root (BPF needs CAP_BPF and CAP_PERFMON).

GO      ?= go
BIN     := bin/synth
OUT     ?= perf.data
# Debian packages the targets need: clang/llvm-strip for make generate and
# its check, libbpf headers for the BPF C sources, perf as the test oracle,
# gcc (with binutils' readelf) for the synth record workload and build-ID checks,
# python3-fusepy for the test's FUSE server that never answers a read;
# hotspot (its perfparser) and cargo with librust-linux-perf-data-dev,
# the outside perf.data readers of the tests (built offline, see
# testdata/perfread).
APT_PKGS := clang-19 llvm-19 libbpf-dev linux-perf gcc python3-fusepy hotspot cargo librust-linux-perf-data-dev nodejs
SUDO    := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# The host's multiarch triplet (x86_64-linux-gnu, aarch64-linux-gnu): where
# Debian keeps its shared libraries and hotspot's perfparser.
MULTIARCH := $(shell uname -m)-linux-gnu
# staticcheck, for make vet: a fixed release, as a new one may find new
# things; go install builds it into bin where it is missing.
STATICCHECK_VERSION := v0.8.2
STATICCHECK := bin/staticcheck-$(STATICCHECK_VERSION)/staticcheck

.PHONY: all build dump deps generate check-generate check-generate-trixie test vet vet-arm64 perfdata-js vmtest vmtest-short clean

all: build

build:
	$(GO) build -buildvcs=auto -o $(BIN) ./cmd/synth # stamps the commit for --version

# The main job: a perf.data with every mapping on the host.
dump: build
	./$(BIN) dump -o $(OUT)

# Install what is missing on a fresh machine, then the Go modules.
deps: $(STATICCHECK)
	@if ! command -v clang-19 >/dev/null || ! command -v llvm-strip-19 >/dev/null || \
	    ! command -v perf >/dev/null || ! command -v gcc >/dev/null || ! command -v readelf >/dev/null || \
	    [ ! -f /usr/include/bpf/bpf_helpers.h ] || ! /usr/bin/python3 -c 'import fusepy' 2>/dev/null || \
	    [ ! -x /usr/lib/$(MULTIARCH)/libexec/hotspot-perfparser ] || [ ! -x /usr/bin/cargo ] || \
	    ! ls -d /usr/share/cargo/registry/linux-perf-data-* >/dev/null 2>&1 || ! command -v node >/dev/null; then \
		echo "installing $(APT_PKGS)"; \
		$(SUDO) apt-get update -q && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q $(APT_PKGS); \
	fi
	$(GO) mod download

$(STATICCHECK):
	GOBIN=$(CURDIR)/$(@D) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

# Rebuild the committed bpf2go output from bpf/*.c and from synth bench's
# floor, cmd/synth/internal/bench/floor/*.c, which includes bpf's headers
# (see bpf/gen_test.go for why this goes through a scratch directory).
generate: deps
	$(GO) test -count=1 -run '^TestGeneratedUpToDate$$' ./bpf -update

check-generate: deps
	SYNTH_REQUIRE=1 $(GO) test -count=1 -run '^TestGeneratedUpToDate$$' ./bpf

# The same against trixie's libbpf headers (libbpf 1.5, which defines
# what bookworm's 1.1 does not, __arg_trusted among them), downloaded, not
# installed: the committed objects must come out byte for byte.
check-generate-trixie: deps
	testdata/libbpf/check.sh trixie

# perfdata reads and writes perf.data on any system: it builds for
# macOS and Windows too, tests included. staticcheck adds what go vet
# does not check: unused code (U1000), doc comments that start with the
# name they document (ST1020-ST1022) and consistent receiver names
# (ST1016).
vet: $(STATICCHECK)
	$(GO) vet ./...
	$(STATICCHECK) -checks 'U1000,ST1016,ST1020,ST1021,ST1022' ./...
	@test -z "$$(gofmt -l .)" || { gofmt -l .; echo "gofmt needed"; exit 1; }
	GOOS=darwin $(GO) build ./perfdata
	GOOS=darwin $(GO) vet ./perfdata
	GOOS=windows $(GO) vet ./perfdata
	$(MAKE) perfdata-js
	$(MAKE) vet-arm64

# synth builds for arm64 from the same sources and BPF object: an arm64
# break fails on an x86 machine too. Every package and its tests compile
# for arm64 (the guests of make vmtest-arm64 run them).
vet-arm64:
	GOARCH=arm64 $(GO) build ./...
	GOARCH=arm64 $(GO) vet ./...
	@for p in $$($(GO) list ./...); do \
		GOARCH=arm64 CGO_ENABLED=0 $(GO) test -c -o /dev/null $$p >/dev/null || { echo "arm64: $$p: tests do not build"; exit 1; }; \
	done

# perfdata's tests run off Linux too: under js/wasm, with node (Go's
# lib/wasm/go_js_wasm_exec). Without node this is said, not failed.
perfdata-js:
	@if command -v node >/dev/null; then \
		PATH="$$PATH:$$($(GO) env GOROOT)/lib/wasm" GOOS=js GOARCH=wasm $(GO) test -count=1 ./perfdata; \
	else echo "perfdata-js: no node: perfdata's tests were not run off Linux"; fi

# Every test, with skips for missing root/BPF/perf/clang turned into failures.
# One package at a time: the tests that run perf record -a must not see
# another package's test processes with their odd mappings (perf 6.1
# aborted in its build-ID code, util/build-id.c:1010, "buffer overflow
# detected", while the synth package's tests ran beside cmd/synth's).
# Each test is bounded by its own events and watchdogs; a package's sum is
# under 3 minutes on an idle host of the AMD EPYC kind, but beside a
# loaded host (load 20) the synth package passed 10 minutes, go test's
# default bound, with no test stuck: 30 minutes bounds a package instead.
test: deps vet
	SYNTH_REQUIRE=1 $(GO) test -count=1 -p 1 -timeout 30m ./...

# The kernel matrix: Debian's 5.10 (Debian 11), 6.1 and 6.12 (Debian 12),
# 6.18 (trixie-backports) and the newest kernel Debian ships, resolved
# when it runs, booted under QEMU, and the host's own kernel, each running
# the kernel-dependent tests; one line per kernel at the end, which fails
# unless auto chose what that kernel must give (testdata/vmtest/run.sh).
# KERNELS="6.1 host" picks some.
vmtest: deps
	testdata/vmtest/run.sh $(KERNELS)

# CI's share of it: the dump against /proc and the fallbacks, on 6.1 and
# on the newest kernel Debian ships, so that the day Debian ships a kernel
# whose verifier refuses the maple walk, CI fails.
vmtest-short: deps
	VMTEST_SUITE=short testdata/vmtest/run.sh 6.1 newest

# The same tests on Debian's arm64 kernels: 6.1 and 6.12 (Debian 12),
# the newest Debian ships, and 6.12 with 16K pages (the arm64-16k
# flavour), under qemu-system-aarch64 (TCG) over a Debian 12 arm64
# userland that testdata/vmtest/rootfs.sh builds once; the tests are
# cross-built. One line per kernel, as vmtest. KERNELS="6.12-16k" picks
# some. vmtest-arm64-short, for CI: the dump against /proc on the
# 16K-page kernel.
# An agent's loop (TestSoak) under mmap/munmap, process and build-ID
# churn for SOAK (default 3m; SOAK=1h): RSS, descriptors, goroutines and
# the Table's size at intervals, the Table against /proc at the end.
# make test runs it for 5 s.
SOAK ?= 3m
.PHONY: soak
soak: deps
	SYNTH_REQUIRE=1 $(GO) test -count=1 -run '^TestSoak$$' -v -timeout 0 ./synth -args -soak=$(SOAK)

# The EXITs a whole-host Session marks Superseded though their
# generation's dump read the process (issue 56), for SOAK_EXITS
# (default 30s): a dump every 350 ms while a shell starts short processes.
SOAK_EXITS ?= 30s

.PHONY: soak-exits
soak-exits: deps
	SYNTH_REQUIRE=1 $(GO) test -count=1 -run '^TestSoakExits$$' -v -timeout 0 ./synth -args -soak-exits=$(SOAK_EXITS)

.PHONY: vmtest-arm64 vmtest-arm64-short
vmtest-arm64: deps
	VMTEST_ARCH=arm64 testdata/vmtest/run.sh $(KERNELS)

vmtest-arm64-short: deps
	VMTEST_ARCH=arm64 VMTEST_SUITE=short testdata/vmtest/run.sh 6.12-16k

clean:
	rm -rf bin
