# hoplab: `make demo` and `make test` work on a fresh Debian 12 machine as root.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
APT_PACKAGES := iperf3 irtt fping iputils-ping iproute2 nftables ethtool \
	wireguard-tools wireguard-go linux-perf postgresql
APT_TOOLS := iperf3 irtt fping ping ip tc nft ethtool wg wireguard-go perf \
	$(firstword $(wildcard /usr/lib/postgresql/*/bin/initdb) postgresql-initdb)

.PHONY: all setup system venv demo test lint typecheck unit lab-tests bench clean distclean

all: setup

setup: system venv

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

demo: setup
	$(BIN)/python -m hoplab.demo

lint: venv
	$(BIN)/ruff check src tests bench

typecheck: venv
	$(BIN)/mypy

unit: venv
	$(BIN)/pytest -q tests/unit

test: setup lint typecheck
	$(BIN)/pytest -q tests
	@left=$$(ip netns list 2>/dev/null | grep -c '^hoplab' || true); \
	if [ "$$left" != 0 ]; then echo "tests left $$left hoplab namespaces behind"; exit 1; fi

bench: setup
	$(BIN)/python bench/lab_setup.py

clean:
	-$(BIN)/hoplab clean

distclean: clean
	rm -rf $(VENV) build *.egg-info
