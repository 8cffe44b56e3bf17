# Atoll — entry points for people and CI (.ci/run runs `make test`).
#
#   make deps    Debian packages (only the missing ones; needs root) and .venv with pytest, websockets
#   make build   swift build -c $(SWIFT_CONFIG), then CMake configure + build in build/ (the
#                library, the C examples and tests, and the atoll command as build/bin/atoll)
#   make test    deps, build, swift test, ctest, pytest (bindings/python/tests, tests/cli, tests/net,
#                tests/admin: the admin console in headless chromium, screenshots in build/admin-screenshots,
#                tests/faults: a few rounds of each fault, tests/hostile: forged clients, tokens,
#                a small load run, tests/cluster: three atoll-servers on PostgreSQL behind nginx,
#                one killed). Before the suites it starts a throwaway PostgreSQL cluster
#                (tests/postgres/cluster.py: 127.0.0.1, a free port, in a temporary directory),
#                exports its URL as ATOLL_TEST_POSTGRES to every suite, and removes it at the end,
#                whatever failed. Debian's own cluster on 5432, if the package started one, is
#                neither used nor in the way. The sync suites (Swift's and Python's) then run a
#                second time with the servers' data in PostgreSQL (ATOLL_SYNC_STORE=postgres).
#   make test-cluster   deps, build, then only that PostgreSQL cluster and tests/cluster
#   make demo    deps, build, then runs the examples (C, Swift, Python) on realm files in a
#                temporary directory, the atoll command on one of them, and the sync demo: an
#                atoll-server with a C, a Python and a Swift host as three users
#   make stress  the proofs at full size (convergence, triples, faults, fuzzing, hostile clients,
#                load) and their summary table (docs/testing.md)
#   make bench   deps, then bench/run (storage), bench/net/run (network), bench/sync (sync),
#                bench/cluster (PostgreSQL, 1-3 instances); make bench-net, make bench-sync,
#                make bench-cluster: one of them
#   make memcheck-net   tests/net with the servers under valgrind
#   make fuzz    the fuzz targets (tests/fuzz: objects, rql, sync, http) built with libFuzzer into
#                .build-fuzz, each run FUZZ_SECONDS (default 20); fails on any crash (docs/testing.md)
#   make install installs the library, header, atoll.pc, the CMake package and bin/atoll under PREFIX
#   make clean   removes build/, .build/, .build-fuzz/ and .build-local/ (distclean also removes .venv)
#
# Debug or release: libatoll.so is built in release everywhere (SWIFT_CONFIG, default release:
# it builds faster here, ~3 s vs ~7 s for a small package, and runs faster). `swift build`, the
# CMake custom target, ATOLL_LIBRARY for pytest and the demo all use that one configuration;
# `swift test` builds debug, which is what it always does.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.NOTPARALLEL:
.DEFAULT_GOAL := build

SWIFT_CONFIG ?= release
BUILD_DIR ?= build
VENV ?= .venv
SWIFT ?= swift
CMAKE ?= cmake
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

# The network layer (AtollNet): wslay, http-parser, OpenSSL; its tests and benchmark use the
# openssl and curl commands and wrk. The server's PostgreSQL store links libpq (libpq-dev); the
# tests run a throwaway cluster of Debian's PostgreSQL server (postgresql: initdb, pg_ctl, psql)
# and put Debian's nginx (nginx-light) in front of several instances (tests/cluster).
DEB_PACKAGES := libsqlite3-dev libjansson-dev cmake pkg-config python3-venv python3-pip \
    libwslay-dev libhttp-parser-dev libssl-dev openssl curl wrk chromium \
    postgresql libpq-dev nginx-light
# playwright drives Debian's chromium for the admin console's tests (tests/admin); its wheel
# carries its own driver, and the tests never download a browser.
PYTHON_TOOLS := pytest websockets playwright
# The Debian python, when there is one: a pyenv shim earlier in PATH has no Debian venv/pip.
SYSTEM_PYTHON := $(if $(wildcard /usr/bin/python3),/usr/bin/python3,$(shell command -v python3))
LIBATOLL := $(CURDIR)/.build/$(SWIFT_CONFIG)/libatoll.so
# The local-only build of the typed API (the package trait Sync off: tests/build/local-only.sh).
LOCAL_SCRATCH := .build-local
PYTHON_TESTS := bindings/python/tests
# The sync suites that run twice in `make test`: on SQLite, and with the servers' data in
# PostgreSQL (docs/testing.md, "Several instances").
PYTHON_SYNC_TESTS := bindings/python/tests/test_sync.py
# (Every class of AtollSyncTests but the two that start no server, and the typed API's sync tests.)
SYNC_SWIFT_SUITES := --filter 'AtollSyncTests|AtollTests\.SyncTests' --skip 'IntegratorTests|WireTests|ParallelTests|Simulation'
# The deterministic simulation of sync (docs/testing.md, "Simulation"): schedules in `make test`,
# and writes per process in `make stress` (two processes, one per core, a million in all; each
# runs the test binary itself, since two `swift test`s wait for each other's lock on .build).
SIM_SCHEDULES ?= 2000
STRESS_SIM_OPERATIONS ?= 500000
# AtollNet against outside peers (Python's websockets, curl, raw sockets), through atoll-net-peer.
NET_TESTS := tests/net
ATOLL_NET_PEER := $(CURDIR)/.build/$(SWIFT_CONFIG)/atoll-net-peer
# The sync server, for the sync tests (C, Python) and the demo.
ATOLL_SERVER := $(CURDIR)/.build/$(SWIFT_CONFIG)/atoll-server
# The atoll command's tests run the staged program (SwiftPM's atoll-cli, named as installed).
CLI_TESTS := tests/cli
# The admin API and console (real server, Python sync clients, headless chromium); screenshots of
# each view go to ADMIN_SCREENSHOTS.
ADMIN_TESTS := tests/admin
ADMIN_SCREENSHOTS := $(CURDIR)/$(BUILD_DIR)/admin-screenshots
ATOLL_CLI := $(CURDIR)/$(BUILD_DIR)/bin/atoll
# Faults (tests/faults): SIGKILLed clients and servers, a full disk (a tmpfs the tests mount: needs
# root) and read-only files. `make test` runs a few rounds; `make stress` runs 100 of each kill.
# ATOLL_STRESS_REPORT=FILE appends one JSON summary line per kind of fault.
FAULT_TESTS := tests/faults
# Hostile input and load against a real atoll-server: forged raw-protocol clients, forged and
# stale tokens, fan-out to many subscribed clients (docs/testing.md). `make test` runs the load
# with 100 clients for 10 s; `make stress` with 1,000 for 60 s.
HOSTILE_TESTS := tests/hostile
# Several atoll-servers on one PostgreSQL database behind nginx: failover, propagation between
# instances, shared users (docs/deploy.md); one instance on SQLite behind nginx. The PostgreSQL
# tests skip only when ATOLL_TEST_POSTGRES is unset, which `make test` never leaves it.
CLUSTER_TESTS := tests/cluster
PG_CLUSTER := tests/postgres/cluster.py
# Recipe text: starts a throwaway PostgreSQL cluster in a temporary directory, exports its URL as
# ATOLL_TEST_POSTGRES for the rest of the recipe and stops and removes it when the recipe's shell
# exits, failed or not. When it cannot start, "postgres" is added to $failed and the URL is
# empty (the cluster suite then skips, and the target fails for it).
WITH_POSTGRES = pg_dir=$$(mktemp -d "$${TMPDIR:-/tmp}/atoll-pg.XXXXXX"); \
	trap '$(VENV)/bin/python $(PG_CLUSTER) stop "$$pg_dir" || echo "could not remove the PostgreSQL cluster in $$pg_dir" >&2' EXIT; \
	echo "== PostgreSQL for the suites ($(PG_CLUSTER) start $$pg_dir)"; \
	if ATOLL_TEST_POSTGRES=$$($(VENV)/bin/python $(PG_CLUSTER) start "$$pg_dir"); then \
	    echo "ATOLL_TEST_POSTGRES=$$ATOLL_TEST_POSTGRES"; \
	else ATOLL_TEST_POSTGRES=""; failed="$$failed postgres"; fi; \
	export ATOLL_TEST_POSTGRES
CLUSTER_SUITE = echo "== pytest $(CLUSTER_TESTS) (three atoll-servers on PostgreSQL behind nginx, one killed)"; \
	ATOLL_LIBRARY=$(LIBATOLL) ATOLL_SERVER=$(ATOLL_SERVER) $(VENV)/bin/pytest -q -rs $(CLUSTER_TESTS) \
	    || failed="$$failed cluster-tests"

# Fuzzing (docs/testing.md): a second, instrumented build of the package (swiftc
# -sanitize=fuzzer: libFuzzer's coverage in every Swift module) in its own scratch path, and the
# C targets compiled by the toolchain's clang, whose libFuzzer runtime matches.
FUZZ_SCRATCH := .build-fuzz
FUZZ_BIN := $(CURDIR)/$(FUZZ_SCRATCH)/release
FUZZ_TARGETS := objects rql sync http
FUZZ_SECONDS ?= 20
STRESS_FUZZ_SECONDS ?= 300
FUZZ_CC ?= $(dir $(realpath $(shell command -v $(SWIFT))))clang
FUZZ_SWIFT_FLAGS := -c release --scratch-path $(FUZZ_SCRATCH) -Xswiftc -sanitize=fuzzer -Xswiftc -DATOLL_LIBFUZZER

.PHONY: deps build test test-cluster demo bench bench-net bench-sync memcheck-net install clean \
    distclean fuzz fuzz-build stress bench-cluster

deps:
	@missing=""; \
	for p in $(DEB_PACKAGES); do \
	    dpkg -s "$$p" 2>/dev/null | grep -q '^Status: install ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -z "$$missing" ]; then \
	    echo "deps: Debian packages present ($(DEB_PACKAGES))"; \
	else \
	    if [ "$$(id -u)" -eq 0 ]; then sudo=""; \
	    elif command -v sudo >/dev/null; then sudo=sudo; \
	    else echo "deps: missing Debian packages:$$missing; run 'make deps' as root" >&2; exit 1; fi; \
	    echo "deps: installing$$missing"; \
	    $$sudo apt-get update; \
	    $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $$missing; \
	fi
	@if ! $(VENV)/bin/python -c '' 2>/dev/null; then \
	    echo "deps: creating $(VENV) with $(SYSTEM_PYTHON)"; \
	    rm -rf $(VENV); \
	    $(SYSTEM_PYTHON) -m venv $(VENV); \
	fi
	@missing=""; \
	for m in $(PYTHON_TOOLS); do $(VENV)/bin/python -c "import $$m" 2>/dev/null || missing="$$missing $$m"; done; \
	if [ -z "$$missing" ]; then \
	    echo "deps: $(VENV) has $(PYTHON_TOOLS)"; \
	else \
	    echo "deps: installing$$missing into $(VENV)"; \
	    $(VENV)/bin/python -m pip install --quiet $$missing; \
	fi

build:
	$(SWIFT) build -c $(SWIFT_CONFIG)
	$(CMAKE) -S . -B $(BUILD_DIR) -DATOLL_SWIFT_CONFIG=$(SWIFT_CONFIG)
	$(CMAKE) --build $(BUILD_DIR) -j $(JOBS)

# Every suite runs even when an earlier one fails; the target fails at the end if any did.
test: deps build
	@failed=""; \
	$(WITH_POSTGRES); \
	echo "== swift test (the simulation: $(SIM_SCHEDULES) schedules)"; \
	ATOLL_SIM_SCHEDULES=$(SIM_SCHEDULES) $(SWIFT) test || failed="$$failed swift-test"; \
	echo "== swift test: the sync suites again, the servers' data in PostgreSQL (ATOLL_SYNC_STORE=postgres)"; \
	ATOLL_SYNC_STORE=postgres $(SWIFT) test --skip-build $(SYNC_SWIFT_SUITES) || failed="$$failed swift-sync-postgres"; \
	echo "== a local-only Swift app (the package trait Sync off, into $(LOCAL_SCRATCH)) links no network library"; \
	tests/build/local-only.sh $(LOCAL_SCRATCH) .build/$(SWIFT_CONFIG)/atoll-sync-example || failed="$$failed local-only"; \
	echo "== ctest ($(BUILD_DIR))"; \
	(cd $(BUILD_DIR) && ATOLL_SERVER=$(ATOLL_SERVER) ctest --output-on-failure -j $(JOBS)) || failed="$$failed ctest"; \
	echo "== pytest $(PYTHON_TESTS) $(CLI_TESTS) (ATOLL_LIBRARY=$(LIBATOLL), ATOLL_CLI=$(ATOLL_CLI))"; \
	ATOLL_LIBRARY=$(LIBATOLL) ATOLL_CLI=$(ATOLL_CLI) ATOLL_SERVER=$(ATOLL_SERVER) $(VENV)/bin/pytest -q $(PYTHON_TESTS) $(CLI_TESTS) \
	    || failed="$$failed pytest"; \
	echo "== pytest $(PYTHON_SYNC_TESTS) again, the server's data in PostgreSQL (ATOLL_SYNC_STORE=postgres)"; \
	ATOLL_SYNC_STORE=postgres ATOLL_LIBRARY=$(LIBATOLL) ATOLL_SERVER=$(ATOLL_SERVER) $(VENV)/bin/pytest -q $(PYTHON_SYNC_TESTS) \
	    || failed="$$failed pytest-sync-postgres"; \
	echo "== pytest $(NET_TESTS) (ATOLL_NET_PEER=$(ATOLL_NET_PEER))"; \
	ATOLL_NET_PEER=$(ATOLL_NET_PEER) $(VENV)/bin/pytest -q --durations=10 $(NET_TESTS) || failed="$$failed net-tests"; \
	echo "== pytest $(ADMIN_TESTS) (screenshots in $(ADMIN_SCREENSHOTS))"; \
	ATOLL_LIBRARY=$(LIBATOLL) ATOLL_SERVER=$(ATOLL_SERVER) ATOLL_SCREENSHOTS=$(ADMIN_SCREENSHOTS) \
	    $(VENV)/bin/pytest -q -s $(ADMIN_TESTS) || failed="$$failed admin-tests"; \
	echo "== pytest $(FAULT_TESTS) (small: a few rounds of each fault)"; \
	ATOLL_LIBRARY=$(LIBATOLL) ATOLL_SERVER=$(ATOLL_SERVER) $(VENV)/bin/pytest -q $(FAULT_TESTS) \
	    || failed="$$failed fault-tests"; \
	echo "== pytest $(HOSTILE_TESTS) (forged clients, tokens, load: 100 clients for 10 s)"; \
	ATOLL_LIBRARY=$(LIBATOLL) ATOLL_SERVER=$(ATOLL_SERVER) $(VENV)/bin/pytest -q $(HOSTILE_TESTS) \
	    || failed="$$failed hostile-tests"; \
	$(CLUSTER_SUITE); \
	echo "== make fuzz ($(FUZZ_SECONDS) s per target)"; \
	$(MAKE) --no-print-directory fuzz || failed="$$failed fuzz"; \
	if [ -n "$$failed" ]; then echo "make test: FAILED:$$failed" >&2; exit 1; fi; \
	echo "make test: all passed"

# The cluster suite alone, with its PostgreSQL.
test-cluster: deps build
	@failed=""; \
	$(WITH_POSTGRES); \
	$(CLUSTER_SUITE); \
	if [ -n "$$failed" ]; then echo "make test-cluster: FAILED:$$failed" >&2; exit 1; fi

demo: deps build
	@tmp=$$(mktemp -d "$${TMPDIR:-/tmp}/atoll-demo.XXXXXX"); \
	trap 'rm -rf "$$tmp"' EXIT; \
	echo "== examples/quickstart.c ($$tmp/quickstart.realm)"; \
	$(BUILD_DIR)/examples/quickstart "$$tmp/quickstart.realm"; \
	echo; \
	echo "== examples/jansson_host.c ($$tmp/jansson_host.realm)"; \
	$(BUILD_DIR)/examples/jansson_host "$$tmp/jansson_host.realm"; \
	echo; \
	echo "== examples/swift/main.swift ($$tmp/swift.realm)"; \
	.build/$(SWIFT_CONFIG)/atoll-swift-example "$$tmp/swift.realm"; \
	echo; \
	echo "== examples/quickstart.py ($$tmp/quickstart-py.realm)"; \
	ATOLL_LIBRARY=$(LIBATOLL) PYTHONPATH=$(CURDIR)/bindings/python/src$${PYTHONPATH:+:$$PYTHONPATH} \
	    $(VENV)/bin/python examples/quickstart.py "$$tmp/quickstart-py.realm"; \
	echo; \
	echo "== the atoll command on $$tmp/quickstart-py.realm"; \
	$(BUILD_DIR)/bin/atoll query "$$tmp/quickstart-py.realm" Dog 'age > $$0 SORT(age DESC)' '[4]'; \
	$(BUILD_DIR)/bin/atoll info "$$tmp/quickstart-py.realm"; \
	echo; \
	echo "== sync: atoll-server and three hosts (examples/sync-demo.sh)"; \
	ATOLL_LIBRARY=$(LIBATOLL) PYTHONPATH=$(CURDIR)/bindings/python/src$${PYTHONPATH:+:$$PYTHONPATH} \
	    examples/sync-demo.sh "$$tmp" $(ATOLL_SERVER) $(BUILD_DIR)/examples/sync_demo $(VENV)/bin/python \
	    .build/$(SWIFT_CONFIG)/atoll-sync-example

bench: deps
	ATOLL_LIBRARY=$(LIBATOLL) SWIFT_CONFIG=$(SWIFT_CONFIG) ./bench/run
	./bench/net/run
	$(MAKE) bench-sync
	$(MAKE) bench-cluster

# The sync benchmark alone (bench/sync: commit-to-observer latency, upload and fan-out
# throughput, bootstrap), 3 runs; BENCH_SYNC_N objects (default 100,000).
bench-sync: deps
	$(SWIFT) build -c release --product atoll-sync-bench
	for i in 1 2 3; do .build/release/atoll-sync-bench; done

# The PostgreSQL cluster benchmark alone (bench/cluster: one instance on SQLite against 1, 2 and 3
# instances on one PostgreSQL database: write throughput and propagation between instances),
# 3 runs, on a throwaway PostgreSQL cluster started for it.
bench-cluster: deps
	$(SWIFT) build -c release --product atoll-cluster-bench
	@failed=""; \
	$(WITH_POSTGRES); \
	[ -n "$$ATOLL_TEST_POSTGRES" ] || exit 1; \
	for i in 1 2 3; do BENCH_POSTGRES=$$ATOLL_TEST_POSTGRES .build/release/atoll-cluster-bench || exit 1; done

# The proofs at full size (docs/testing.md): each suite appends a row to STRESS_REPORT and
# tests/stress/summary.py prints the table (rounds, operations, faults injected, data lost,
# crashes, figures); it fails when any suite lost data or crashed. STRESS_SEED fixes the
# convergence harness's seed (default: the time, printed).
STRESS_REPORT := $(CURDIR)/$(BUILD_DIR)/stress-report.jsonl
STRESS_SEED ?= $(shell date +%s)
stress: deps build
	@mkdir -p $(BUILD_DIR); rm -f $(STRESS_REPORT); failed=""; \
	echo "== convergence: 20 clients, 4,000 operations, 6 server restarts, seed $(STRESS_SEED)"; \
	ATOLL_STRESS_REPORT=$(STRESS_REPORT) ATOLL_CONVERGENCE_SEED=$(STRESS_SEED) ATOLL_CONVERGENCE_CLIENTS=20 \
	    ATOLL_CONVERGENCE_OPS=4000 ATOLL_CONVERGENCE_RESTARTS=6 \
	    $(SWIFT) test --filter ConvergenceTests || failed="$$failed convergence"; \
	echo "== the simulation: two processes of $(STRESS_SIM_OPERATIONS) writes each, seeds from $(STRESS_SEED) and $(STRESS_SEED)+10000000"; \
	$(SWIFT) build --build-tests; \
	tests="$$($(SWIFT) build --show-bin-path)/AtollPackageTests.xctest AtollSyncTests.SimulationTests/testRandomSchedulesConverge"; \
	ATOLL_STRESS_REPORT=$(STRESS_REPORT) ATOLL_SIM_SEED=$(STRESS_SEED) ATOLL_SIM_SCHEDULES=0 ATOLL_SIM_MIN_OPERATIONS=$(STRESS_SIM_OPERATIONS) \
	    $$tests > $(BUILD_DIR)/stress-sim-1.log 2>&1 & one=$$!; \
	ATOLL_STRESS_REPORT=$(STRESS_REPORT) ATOLL_SIM_SEED=$$(( $(STRESS_SEED) + 10000000 )) ATOLL_SIM_SCHEDULES=0 \
	    ATOLL_SIM_MIN_OPERATIONS=$(STRESS_SIM_OPERATIONS) \
	    $$tests > $(BUILD_DIR)/stress-sim-2.log 2>&1 & two=$$!; \
	wait $$one || failed="$$failed simulation"; wait $$two || failed="$$failed simulation"; \
	grep -h -E '^simulation:|error:' $(BUILD_DIR)/stress-sim-1.log $(BUILD_DIR)/stress-sim-2.log | head -40; \
	echo "== every triple of concurrent instruction kinds, all six orders"; \
	ATOLL_STRESS_REPORT=$(STRESS_REPORT) ATOLL_TRIPLES=all \
	    $(SWIFT) test --filter IntegratorTests.testRandomTriplesOfConcurrentKindsConverge \
	    || failed="$$failed triples"; \
	echo "== pytest $(FAULT_TESTS) (ATOLL_STRESS=1: 100 rounds of each kill)"; \
	ATOLL_STRESS=1 ATOLL_STRESS_REPORT=$(STRESS_REPORT) ATOLL_LIBRARY=$(LIBATOLL) ATOLL_SERVER=$(ATOLL_SERVER) \
	    $(VENV)/bin/pytest -q -s $(FAULT_TESTS) || failed="$$failed fault-tests"; \
	echo "== pytest $(HOSTILE_TESTS) (1,000 clients for 60 s)"; \
	ATOLL_STRESS_REPORT=$(STRESS_REPORT) ATOLL_LIBRARY=$(LIBATOLL) ATOLL_SERVER=$(ATOLL_SERVER) \
	    ATOLL_LOAD_CLIENTS=1000 ATOLL_LOAD_SECONDS=60 $(VENV)/bin/pytest -q -s $(HOSTILE_TESTS) \
	    || failed="$$failed hostile-tests"; \
	echo "== make fuzz ($(STRESS_FUZZ_SECONDS) s per target)"; \
	ATOLL_STRESS_REPORT=$(STRESS_REPORT) $(MAKE) --no-print-directory fuzz FUZZ_SECONDS=$(STRESS_FUZZ_SECONDS) \
	    || failed="$$failed fuzz"; \
	echo "== summary"; \
	$(VENV)/bin/python tests/stress/summary.py $(STRESS_REPORT) || failed="$$failed summary"; \
	if [ -n "$$failed" ]; then echo "make stress: FAILED:$$failed" >&2; exit 1; fi; \
	echo "make stress: all passed"

# The network benchmark alone (bench/net/run: 1,000 WebSockets, echo load, HTTP with wrk).
bench-net: deps
	./bench/net/run

# tests/net with every server under valgrind (memory errors and definite leaks fail the server's
# clean-exit check); about 3 minutes. Possible leaks are the Swift runtime's caches and threads.
memcheck-net: deps build
	@command -v valgrind >/dev/null || { echo "memcheck-net: apt-get install valgrind" >&2; exit 1; }
	ATOLL_NET_PEER=$(ATOLL_NET_PEER) \
	ATOLL_NET_PEER_WRAPPER="valgrind --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite -q" \
	    $(VENV)/bin/pytest -q $(NET_TESTS)

# The fuzz targets with libFuzzer: libatoll.so and the Swift targets instrumented, the C targets
# linked to that library.
fuzz-build:
	$(SWIFT) build $(FUZZ_SWIFT_FLAGS) --product atoll
	$(SWIFT) build $(FUZZ_SWIFT_FLAGS) --product atoll-fuzz-sync
	$(SWIFT) build $(FUZZ_SWIFT_FLAGS) --product atoll-fuzz-http
	ln -sf libatoll.so $(FUZZ_BIN)/libatoll.so.0
	for t in objects rql; do \
	    $(FUZZ_CC) -fsanitize=fuzzer -O1 -g -Wall -Werror -Iinclude $$(pkg-config --cflags jansson) \
	        tests/fuzz/c/fuzz_$$t.c -o $(FUZZ_BIN)/atoll-fuzz-$$t \
	        -L$(FUZZ_BIN) -latoll $$(pkg-config --libs jansson) -Wl,-rpath,$(FUZZ_BIN); \
	done

# Each target for FUZZ_SECONDS from its corpus (tests/fuzz/corpus) and what earlier runs found
# ($(BUILD_DIR)/fuzz/corpus); every target runs, and the goal fails if any found a crash, a hang or an
# input over the memory limit.
fuzz: deps fuzz-build
	@failed=""; \
	for t in $(FUZZ_TARGETS); do \
	    FUZZ_BIN=$(FUZZ_BIN) FUZZ_WORK=$(CURDIR)/$(BUILD_DIR)/fuzz tests/fuzz/run $$t $(FUZZ_SECONDS) || failed="$$failed $$t"; \
	done; \
	if [ -n "$$failed" ]; then echo "make fuzz: FAILED:$$failed (inputs in $(BUILD_DIR)/fuzz/artifacts)" >&2; exit 1; fi

# Installs libatoll.so.0, atoll.h, atoll.pc, the CMake package and the atoll command under PREFIX.
PREFIX ?= /usr/local
install: build
	$(CMAKE) --install $(BUILD_DIR) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD_DIR) .build $(FUZZ_SCRATCH) $(LOCAL_SCRATCH)

distclean: clean
	rm -rf $(VENV)
