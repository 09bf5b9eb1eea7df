# oxsupervise build and test entry points. `make test` is what CI runs
# (.ci/run); it fails on any failure.

SHELL   := bash
GO      ?= go
CLANG   ?= clang-19
STRIP   ?= llvm-strip-19
CROSS_OS ?= darwin windows

# Packages whose tests need the kernel-test VM: those whose tests ask
# testutil whether they run there (InVM / SkipUnlessVM). Add a package by
# using those helpers; VMTEST_EXTRA adds packages by hand.
VMTEST_EXTRA ?=
VMTEST_PKGS  ?= $(sort ./internal/vmtest/selftest $(VMTEST_EXTRA) \
	$(patsubst %/,./%,$(dir $(shell grep -rlE --include='*_test.go' 'testutil\.(InVM|SkipUnlessVM)' \
		--exclude-dir=.git --exclude-dir=.vmtest --exclude-dir=bin --exclude-dir=testdata . | sed 's|^\./||'))))
VMTEST_FLAGS ?= -v --timeout 20m --test-timeout 10m
# The kernels the VM suite boots, one boot each (globs, quoted; the newest
# match of each is used): Debian's release kernel (6.1 on bookworm, Landlock
# ABI 2) and its backports kernel (6.12, Landlock ABI 6 with abstract-socket
# scoping), which vm-kernels unpacks from the archive this machine's own apt
# sources name.
CODENAME        := $(shell . /etc/os-release 2>/dev/null && echo $$VERSION_CODENAME)
VMTEST_BACKPORTS ?= .vmtest/kernel-$(CODENAME)-backports
VMTEST_KERNELS  ?= '/boot/vmlinuz-6.1.*' '$(VMTEST_BACKPORTS)/boot/vmlinuz-*'

# A hung test must not eat the CI budget (go test's default is 10m).
UNIT_FLAGS   ?= -count=1 -timeout 6m
VMTEST_RUN   ?=

.PHONY: all build install deb deps bench-deps generate generate-check test unit vet cross vm-kernels vmtest bench bench-go fuzz clean

all: build

# The programs oxsupervise executes (internal/companion), each built from
# ./cmd/NAME: beside it in bin/, in PREFIX/libexec/oxsupervise when
# installed.
COMPANIONS := oxsupervise-launch oxsupervised
# The programs built without cgo, static: those every start of a session
# or a client request executes skip the dynamic loader and libc's start
# (~1.9 ms a start measured). oxsupervise finds users that only NSS knows
# through internal/account (glibc's getent), the launcher looks up none.
# The long-lived daemon keeps cgo: os/user asks NSS in its own process.
STATIC     := oxsupervise oxsupervise-launch
DYNAMIC    := $(filter-out $(STATIC),oxsupervise $(COMPANIONS))

build:
	CGO_ENABLED=0 $(GO) build -o bin/ $(addprefix ./cmd/,$(STATIC))
	$(GO) build -o bin/ $(addprefix ./cmd/,$(DYNAMIC))

# Install for other distributions: the binary and its companions, the
# systemd unit (naming BINDIR), man pages and completions generated from the verbs' --help
# (internal/clidoc), the docs, and /etc/oxsupervise/policy.toml unless one
# exists. Creates /var/log/oxsupervise 0700. E.g. make install PREFIX=/usr
# DESTDIR=/tmp/stage. The Debian package: make deb (into DEBDIR, bin/ by
# default; dist/deb/build.sh).
PREFIX  ?= /usr/local
DESTDIR ?=
DEBDIR  ?= bin

install:
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	v=$$(dist/version.sh); \
	epoch=$${SOURCE_DATE_EPOCH:-$$(git log -1 --format=%ct 2>/dev/null || date +%s)}; \
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-X main.version=$$v" -o "$$tmp/" $(addprefix ./cmd/,$(STATIC)); \
	$(GO) build -trimpath -ldflags "-X main.version=$$v" -o "$$tmp/" $(addprefix ./cmd/,$(DYNAMIC)); \
	$(GO) run ./internal/clidoc/cmd/clidoc --bin "$$tmp/oxsupervise" --version "$$v" \
		--date "$$(date -u -d "@$$epoch" +%Y-%m-%d)" --out "$$tmp/doc"; \
	BIN="$$tmp/oxsupervise" COMPANIONS="$(COMPANIONS)" DOCGEN="$$tmp/doc" PREFIX="$(PREFIX)" DESTDIR="$(DESTDIR)" dist/install.sh

deb:
	@DEBDIR="$(DEBDIR)" GO="$(GO)" COMPANIONS="$(COMPANIONS)" STATIC="$(STATIC)" dist/deb/build.sh

# Debian/Ubuntu packages the tests need: clang-19 and libbpf headers for
# the BPF freshness check, qemu + Debian's kernel + busybox for the
# kernel-test VM, iproute2/util-linux for network namespaces, git and
# python3 for the workload tests; dpkg-dev, lintian, man-db, systemd
# (systemd-analyze), zsh and fish for the package test (dist/);
# libnss-extrausers, an NSS module that needs no server, for the test of
# users only NSS knows (internal/account). The agent
# tests install the real agent CLIs from the npm registry with node and npm
# (DEPS_NODE, installed only when npm is missing: a machine with another
# vendor's nodejs, which provides npm itself, conflicts with Debian's npm).
# `go build` itself needs none of them.
DEPS_APT := ca-certificates xz-utils zstd git python3 iproute2 util-linux kmod \
	clang-19 llvm-19 libbpf-dev linux-libc-dev \
	qemu-system-x86 linux-image-amd64 busybox-static \
	dpkg-dev lintian man-db systemd zsh fish libnss-extrausers
DEPS_NODE := nodejs npm

# Peers the session-start benchmark compares against (optional: reported
# as missing when absent).
bench-deps:
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends bubblewrap firejail

deps:
	apt-get update
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $(DEPS_APT)
	command -v npm >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $(DEPS_NODE)

# Regenerate the BPF objects and their Go bindings. The //go:generate
# lines pin clang-19 and llvm-strip-19 themselves (the output is
# committed and must not depend on which clang is first in PATH).
generate:
	$(GO) generate ./...

# Regenerate into a copy of the tree (another directory, so paths leaking
# into the objects would show up) and fail when any generated file differs
# from the committed one or appears/disappears.
generate-check:
	@if ! command -v $(CLANG) >/dev/null 2>&1 || ! command -v $(STRIP) >/dev/null 2>&1; then \
		echo "!!! generate-check SKIPPED: $(CLANG)/$(STRIP) not installed; committed BPF objects NOT verified fresh" >&2; \
		exit 0; \
	fi; \
	set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	tar --exclude=./.git --exclude=./.vmtest --exclude=./bin -cf - . | tar -C "$$tmp" -xf -; \
	find "$$tmp" \( -name '*_bpfel.go' -o -name '*_bpfel.o' \) -delete; \
	$(MAKE) --no-print-directory -C "$$tmp" generate >"$$tmp.log" 2>&1 || { cat "$$tmp.log"; rm -f "$$tmp.log"; exit 1; }; \
	rm -f "$$tmp.log"; \
	fresh=$$(cd "$$tmp" && find . \( -name '*_bpfel.go' -o -name '*_bpfel.o' \) -print | sort); \
	committed=$$(find . -path ./.git -prune -o -path ./.vmtest -prune -o \( -name '*_bpfel.go' -o -name '*_bpfel.o' \) -print | sort); \
	if [ "$$fresh" != "$$committed" ]; then \
		echo "generate-check: the set of generated files differs; run make generate" >&2; \
		diff <(echo "$$committed") <(echo "$$fresh") >&2 || true; exit 1; \
	fi; \
	for f in $$fresh; do \
		cmp -s "$$f" "$$tmp/$$f" || { echo "generate-check: $$f is stale; run make generate" >&2; exit 1; }; \
	done; \
	echo "generate-check: $$(echo $$fresh | wc -w) generated files match"

vet:
	$(GO) vet ./...

# Cross builds: the binary and every package, their vet, and their test
# binaries compiled (not run: -exec true) for each non-Linux OS.
cross:
	@set -e; for os in $(CROSS_OS); do \
		echo "cross: GOOS=$$os build, vet, compile tests"; \
		GOOS=$$os $(GO) build ./...; \
		GOOS=$$os $(GO) vet ./...; \
		GOOS=$$os $(GO) test -exec true ./... >/dev/null; \
	done

# internal/account again without cgo: the build oxsupervise ships as
# (STATIC), whose os/user reads only the files.
unit:
	$(GO) test $(UNIT_FLAGS) ./...
	CGO_ENABLED=0 $(GO) test $(UNIT_FLAGS) ./internal/account/

vm-kernels:
	internal/vmtest/fetch-kernel.sh $(CODENAME)-backports $(VMTEST_BACKPORTS)

# Every kernel boots even when an earlier one failed; the target fails if
# any did.
vmtest: vm-kernels
	@failed=; for k in $(VMTEST_KERNELS); do \
		echo "=== vmtest: kernel $$k"; \
		$(GO) run ./internal/vmtest/cmd/vmtest --kernel "$$k" $(VMTEST_FLAGS) $(if $(VMTEST_RUN),--run '$(VMTEST_RUN)') -- $(VMTEST_PKGS) || failed="$$failed $$k"; \
	done; \
	if [ -n "$$failed" ]; then echo "vmtest: FAILED on:$$failed" >&2; exit 1; fi; \
	echo "vmtest: passed on every kernel: $(VMTEST_KERNELS)"

# Short fixed-size fuzzing of the parsers that take untrusted input (seed
# corpora committed under each package's testdata/fuzz/). A count, not a
# duration, and a short minimisation budget: with a duration, an input
# still being minimised when time runs out fails the run with "context
# deadline exceeded" although nothing was found.
FUZZTIME ?= 20000x
FUZZFLAGS = -run '^$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 3s
fuzz:
	$(GO) test $(FUZZFLAGS) -fuzz '^FuzzLoadTOML$$' ./policy
	$(GO) test $(FUZZFLAGS) -fuzz '^FuzzSplitBash$$' ./policy
	$(GO) test $(FUZZFLAGS) -fuzz '^FuzzDecodeRequest$$' ./daemon

test: generate-check vet cross unit fuzz vmtest

# Benchmarks (issue 11): needs root, unattended (~9 min here), writes
# bench/results/. OXBENCH_ARGS='--quick fs net' selects suites or a smoke run.
bench:
	bench/run.sh

# The Go micro-benchmarks of every package, without the harness.
bench-go:
	$(GO) test -run '^$$' -bench . ./...

clean:
	rm -rf bin .vmtest
