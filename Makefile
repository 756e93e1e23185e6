# hoplab: `make demo` and `make test` work on a fresh Debian 12 machine as root.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Debian packages for the lab tools, the PostgreSQL and Chromium tests, the venv
# (python3-venv) and building Rust code (gcc and libc6-dev: the linker; curl for rustup);
# dropbear, static BusyBox and OpenSSH's server for the emulated devices (tests/helpers/devices.py).
# git for hoplab bisect (it drives git bisect run) and its tests; netsniff-ng for trafgen,
# the frame generator of throughput tests (RFC 2544). syslinux, mtools and dosfstools
# make the stand-in firmware disk image the firmware VM tests boot (tests/helpers/firmware.py).
APT_PACKAGES := iperf3 irtt fping iputils-ping iproute2 nftables ethtool \
	wireguard-tools wireguard-go linux-perf postgresql chromium nginx \
	python3-venv gcc libc6-dev curl ca-certificates time \
	dropbear-bin busybox-static openssh-server openssh-client git netsniff-ng \
	qemu-system-x86 kmod syslinux syslinux-common mtools dosfstools

# Debian 12's cargo (0.66) is too old for wire/Cargo.lock (version 4): a rustup toolchain,
# pinned, in ~/.cargo. CARGO is looked up when used, so a toolchain `make rust` has just
# installed is the one the next rule runs.
RUST_VERSION := 1.95.0
CARGO ?= $(firstword $(wildcard $(HOME)/.cargo/bin/cargo) $(shell command -v cargo) cargo)
# The crates' tests and clippy run under make -j4 -O (beside-pool) in recipes make does not
# hand its jobserver to, so cargo, finding it named in MAKEFLAGS, warned that it could not
# connect, once per crate, and used its own jobs anyway: it is told nothing of it instead.
CARGO_OWN_JOBS = env -u MAKEFLAGS -u MFLAGS $(CARGO)
WIRE_DIR := wire
WIRE_SRC := $(wildcard $(WIRE_DIR)/src/*.rs) $(WIRE_DIR)/Cargo.toml $(WIRE_DIR)/Cargo.lock
WIRE_BIN := $(BIN)/hoplab-wire

.PHONY: all setup system rust venv wire wire-test inferno demo test check lint typecheck unit unit-xdist \
	lab-tests bench clean distclean vm-cache lab-pool beside-pool

all: setup

setup: system rust venv wire inferno fold gen vm-cache

# What the VM routers of the tests and examples boot: Debian's 6.1 and 6.12 kernels
# unpacked, their initramfs, and whether KVM boots a guest here (tried once: on this
# machine it hangs, and the try waits 20 s). 40 s the first time, nothing after; made
# here, so that no VM's first `lab up` (a user's, a test's) fetches while it boots.
vm-cache: venv
	@if [ "$$(id -u)" = 0 ] && command -v qemu-system-x86_64 >/dev/null; then \
		$(BIN)/hoplab lab fetch examples/vm/kernels.toml; \
	else \
		echo "vm-cache: skipped (needs root and QEMU); a VM's first lab up fetches its kernel"; \
	fi

# System packages: only those not installed yet; never pulls recommends
# (wireguard-tools would otherwise bring a whole kernel image).
system:
	@missing=$$(for p in $(APT_PACKAGES); do \
		dpkg-query -W -f='$${db:Status-Abbrev}' $$p 2>/dev/null | grep -q '^ii' || echo $$p; \
	done); \
	if [ -n "$$missing" ]; then \
		echo "installing system packages:" $$missing; \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
			--no-install-recommends $$missing; \
	fi

# A cargo that can build the wire (reads its version 4 Cargo.lock), or rustup's.
rust:
	@if ! $(CARGO) metadata --locked --offline --no-deps --format-version 1 \
		--manifest-path $(WIRE_DIR)/Cargo.toml >/dev/null 2>&1; then \
		echo "installing Rust $(RUST_VERSION) with rustup into ~/.cargo"; \
		init=$$(mktemp -d)/rustup-init && \
		curl --proto '=https' --tlsv1.2 -sSf -o $$init \
			https://static.rust-lang.org/rustup/dist/$$(uname -m)-unknown-linux-gnu/rustup-init && \
		chmod +x $$init && $$init -y -q --no-modify-path --profile minimal \
			--component clippy --default-toolchain $(RUST_VERSION) && \
		rm -r $$(dirname $$init) && \
		$(HOME)/.cargo/bin/cargo metadata --locked --offline --no-deps --format-version 1 \
			--manifest-path $(WIRE_DIR)/Cargo.toml >/dev/null; \
	fi

venv: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

# inferno (the Rust port of FlameGraph): drawing the flame graphs of profiles
# (docs/profiles.md), and the anchor bench/profile.py times hoplab-fold against;
# installed into the venv's bin.
INFERNO_VERSION := 0.12.3
INFERNO_BIN := $(BIN)/inferno-flamegraph

inferno: $(INFERNO_BIN)

$(INFERNO_BIN): | $(STAMP) rust
	$(CARGO) install --locked --quiet --root $(VENV) inferno --version $(INFERNO_VERSION)

# The userspace link emulator (docs/wire.md), installed next to the venv's python,
# where hoplab looks for it. Rebuilt only when its sources change.
wire: $(WIRE_BIN)

$(WIRE_BIN): $(WIRE_SRC) | $(STAMP) rust
	$(CARGO) build --release --locked --quiet --manifest-path $(WIRE_DIR)/Cargo.toml
	install -m 0755 $(WIRE_DIR)/target/release/hoplab-wire $@

wire-test:
	$(CARGO_OWN_JOBS) test --locked --quiet --manifest-path $(WIRE_DIR)/Cargo.toml
	$(CARGO_OWN_JOBS) clippy --locked --quiet --all-targets --manifest-path $(WIRE_DIR)/Cargo.toml \
		-- -D warnings

# The folder of perf stacks (docs/profiles.md), stackcollapse-perf.pl's rules in Rust,
# installed next to the venv's python like the wire.
.PHONY: fold fold-test flamegraph-ref
FOLD_DIR := fold
FOLD_SRC := $(wildcard $(FOLD_DIR)/src/*.rs) $(FOLD_DIR)/Cargo.toml $(FOLD_DIR)/Cargo.lock
FOLD_BIN := $(BIN)/hoplab-fold

fold: $(FOLD_BIN)

$(FOLD_BIN): $(FOLD_SRC) | $(STAMP) rust
	$(CARGO) build --release --locked --quiet --manifest-path $(FOLD_DIR)/Cargo.toml
	install -m 0755 $(FOLD_DIR)/target/release/hoplab-fold $@

fold-test:
	$(CARGO_OWN_JOBS) test --locked --quiet --manifest-path $(FOLD_DIR)/Cargo.toml
	$(CARGO_OWN_JOBS) clippy --locked --quiet --all-targets --manifest-path $(FOLD_DIR)/Cargo.toml \
		-- -D warnings

# The frame generator and receiver of the throughput kind (docs/experiment-format.md),
# installed next to the venv's python like the wire.
.PHONY: gen gen-test
GEN_DIR := gen
GEN_SRC := $(wildcard $(GEN_DIR)/src/*.rs) $(GEN_DIR)/Cargo.toml $(GEN_DIR)/Cargo.lock
GEN_BIN := $(BIN)/hoplab-gen

gen: $(GEN_BIN)

$(GEN_BIN): $(GEN_SRC) | $(STAMP) rust
	$(CARGO) build --release --locked --quiet --manifest-path $(GEN_DIR)/Cargo.toml
	install -m 0755 $(GEN_DIR)/target/release/hoplab-gen $@

gen-test:
	$(CARGO_OWN_JOBS) test --locked --quiet --manifest-path $(GEN_DIR)/Cargo.toml
	$(CARGO_OWN_JOBS) clippy --locked --quiet --all-targets --manifest-path $(GEN_DIR)/Cargo.toml \
		-- -D warnings

# FlameGraph's stackcollapse-perf.pl (CDDL), the reference bench/profile.py times hoplab
# fold against and tests/unit/test_fold_reference.py checks its stored outputs with when
# it is here: fetched at a pinned commit into build/, never committed. Not part of setup:
# the tests need only the stored outputs, and GitHub may be out of reach.
FLAMEGRAPH_COMMIT := 41fee1f99f9276008b7cd112fca19dc3ea84ac32
STACKCOLLAPSE_PL := build/flamegraph/stackcollapse-perf.pl
STACKCOLLAPSE_SHA256 := 74faa47a29d8df07cb06731dfd8bb94dc4c165b9d811ac6b4c9449eea2ac25d8

flamegraph-ref: $(STACKCOLLAPSE_PL)

$(STACKCOLLAPSE_PL):
	mkdir -p $(dir $@)
	curl --proto '=https' --tlsv1.2 -sSf -o $@.part \
		https://raw.githubusercontent.com/brendangregg/FlameGraph/$(FLAMEGRAPH_COMMIT)/stackcollapse-perf.pl
	echo "$(STACKCOLLAPSE_SHA256)  $@.part" | sha256sum -c --quiet
	mv $@.part $@

demo: setup
	$(BIN)/python -m hoplab.demo

lint: venv
	$(BIN)/ruff check src tests bench

typecheck: venv
	$(BIN)/mypy

unit: venv
	$(BIN)/pytest -q tests/unit

# The unit tests on both cores, as make test runs them (beside the static checks).
unit-xdist: venv
	HOPLAB_REQUIRE_ALL=$(HOPLAB_REQUIRE_ALL) $(BIN)/pytest -q -n 2 tests/unit

# Lint (src, tests, bench), types (mypy over the same) and the unit tests: no root,
# no system tools, no network namespaces.
# Runs as any user who can write this checkout (its caches) and has the venv.
check: lint typecheck unit

# As root (what `make setup` provides: lab tools, PostgreSQL, Chromium) every test must
# run: a skip fails the suite (tests/helpers/require_all.py), but for the skips listed
# there as the kernel lacking a feature. `make test HOPLAB_REQUIRE_ALL=0` allows skips.
HOPLAB_REQUIRE_ALL ?= $(if $(filter 0,$(shell id -u)),1,0)

# The tests start hoplab hundreds of times; where PYTHONDONTWRITEBYTECODE is set (this
# machine's shells set it) each would compile its modules again: 0.17 s a `hoplab run`.
# And pytest would rewrite every test module's asserts again in each of its runs (it
# keeps the rewritten modules only where bytecode may be written): 8.5 s to collect
# the lab tests, 3.7 s with them kept, paid by the `alone` and `machine` phases. So no
# recipe here inherits it (__pycache__ is ignored by git).
unexport PYTHONDONTWRITEBYTECODE
# Most of a lab test's time is traffic at a shaped rate, waited for, so the lab tests run
# two at a time (the pool: tests/helpers/alone.py, docs/testing.md), a file's tests on
# one worker (the examples' file among them), the files dealt longest first
# (tests/helpers/order.py, tests/durations.json) so that both workers end together. The
# pool keeps 1.31 of the 2 cores busy on average; beside it, the static checks (mypy,
# ruff, the Rust crates' tests and clippy) and the unit tests run in the idle
# scheduling class (SCHED_IDLE: `chrt --idle 0`), so they take only the CPU the pool's
# tests leave and give it back the moment one wakes (docs/testing.md): 150 s run
# before the pool on their own. Each of their targets prints its output whole when it
# ends (-O). Those marked `pairs` (VM routers under TCG asserting no speed: examples,
# refusals, cleanups) then run two at a time, beside each other only. Those marked
# `alone` (a VM router's or the generator's own figures) one at a time: in the pool,
# each waited for its neighbour's test to end with one core idle (199 s of a 1,350 s
# run). Those marked `machine` (a plain hoplab clean) last.
test: setup
	$(BIN)/python -m compileall -q src
	$(MAKE) --no-print-directory -j2 lab-pool beside-pool
	HOPLAB_REQUIRE_ALL=$(HOPLAB_REQUIRE_ALL) $(BIN)/pytest -q -n 2 --dist load --durations=5 -m pairs --ignore=tests/unit tests
	HOPLAB_REQUIRE_ALL=$(HOPLAB_REQUIRE_ALL) $(BIN)/pytest -q --durations=10 -m alone --ignore=tests/unit tests
	HOPLAB_REQUIRE_ALL=$(HOPLAB_REQUIRE_ALL) $(BIN)/pytest -q -m machine --ignore=tests/unit tests
	@left=$$(ip netns list 2>/dev/null | grep -c '^hoplab' || true); \
	if [ "$$left" != 0 ]; then echo "tests left $$left hoplab namespaces behind"; exit 1; fi

# make test's pool, and what runs beside it.
lab-pool: setup
	HOPLAB_REQUIRE_ALL=$(HOPLAB_REQUIRE_ALL) $(BIN)/pytest -q -n 2 --dist loadfile --no-loadscope-reorder --durations=25 -m "not machine and not alone and not pairs" --ignore=tests/unit tests

beside-pool: setup
	chrt --idle 0 $(MAKE) --no-print-directory -O -j4 unit-xdist lint typecheck wire-test fold-test gen-test

bench: setup
	$(BIN)/python bench/lab_setup.py

clean:
	-$(BIN)/hoplab clean

distclean: clean
	rm -rf $(VENV) build *.egg-info $(WIRE_DIR)/target $(FOLD_DIR)/target $(GEN_DIR)/target
