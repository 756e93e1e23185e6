# hoplab: `make demo` and `make test` work on a fresh Debian 12 machine as root.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
APT_PACKAGES := iperf3 irtt fping iputils-ping iproute2 nftables ethtool \
	wireguard-tools wireguard-go linux-perf postgresql chromium
APT_TOOLS := iperf3 irtt fping ping ip tc nft ethtool wg wireguard-go perf chromium \
	$(firstword $(wildcard /usr/lib/postgresql/*/bin/initdb) postgresql-initdb)

CARGO ?= cargo
WIRE_DIR := wire
WIRE_SRC := $(wildcard $(WIRE_DIR)/src/*.rs) $(WIRE_DIR)/Cargo.toml $(WIRE_DIR)/Cargo.lock
WIRE_BIN := $(BIN)/hoplab-wire

.PHONY: all setup system venv wire wire-test inferno demo test check lint typecheck unit lab-tests \
	bench clean distclean

all: setup

setup: system venv wire inferno

# System tools: installed only when one is missing; never pulls recommends
# (wireguard-tools would otherwise bring a whole kernel image).
system:
	@missing=0; for t in $(APT_TOOLS); do command -v $$t >/dev/null 2>&1 || missing=1; done; \
	if [ $$missing = 1 ]; then \
		echo "installing system tools: $(APT_PACKAGES)"; \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
			--no-install-recommends $(APT_PACKAGES); \
	fi

venv: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

# inferno (the Rust port of FlameGraph): folding perf stacks and drawing flame graphs
# for profiles (docs/profiles.md), installed into the venv's bin.
INFERNO_VERSION := 0.12.3
INFERNO_BIN := $(BIN)/inferno-flamegraph

inferno: $(INFERNO_BIN)

$(INFERNO_BIN): | $(STAMP)
	$(CARGO) install --locked --quiet --root $(VENV) inferno --version $(INFERNO_VERSION)

# The userspace link emulator (docs/wire.md), installed next to the venv's python,
# where hoplab looks for it. Rebuilt only when its sources change.
wire: $(WIRE_BIN)

$(WIRE_BIN): $(WIRE_SRC) | $(STAMP)
	$(CARGO) build --release --locked --quiet --manifest-path $(WIRE_DIR)/Cargo.toml
	install -m 0755 $(WIRE_DIR)/target/release/hoplab-wire $@

wire-test:
	$(CARGO) test --locked --quiet --manifest-path $(WIRE_DIR)/Cargo.toml
	$(CARGO) clippy --locked --quiet --all-targets --manifest-path $(WIRE_DIR)/Cargo.toml \
		-- -D warnings

demo: setup
	$(BIN)/python -m hoplab.demo

lint: venv
	$(BIN)/ruff check src tests bench

typecheck: venv
	$(BIN)/mypy

unit: venv
	$(BIN)/pytest -q tests/unit

# Lint, types and the unit tests: no root, no system tools, no network namespaces.
# Runs as any user who can write this checkout (its caches) and has the venv.
check: lint typecheck unit

# As root (what `make setup` provides: lab tools, PostgreSQL, Chromium) every test must
# run: a skip fails the suite (tests/helpers/require_all.py), but for the skips listed
# there as the kernel lacking a feature. `make test HOPLAB_REQUIRE_ALL=0` allows skips.
HOPLAB_REQUIRE_ALL ?= $(if $(filter 0,$(shell id -u)),1,0)

test: setup lint typecheck wire-test
	HOPLAB_REQUIRE_ALL=$(HOPLAB_REQUIRE_ALL) $(BIN)/pytest -q tests
	@left=$$(ip netns list 2>/dev/null | grep -c '^hoplab' || true); \
	if [ "$$left" != 0 ]; then echo "tests left $$left hoplab namespaces behind"; exit 1; fi

bench: setup
	$(BIN)/python bench/lab_setup.py

clean:
	-$(BIN)/hoplab clean

distclean: clean
	rm -rf $(VENV) build *.egg-info $(WIRE_DIR)/target
