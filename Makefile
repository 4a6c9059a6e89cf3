# memrelay: the two commands of the quick start are `make demo` and `make test`.
SHELL := /bin/bash
CARGO ?= cargo
VENV := lab/.venv
# The tests' binaries: cargo's release-tests profile (release without LTO), for every suite.
TEST_BIN := $(CURDIR)/target/release-tests
LAB := $(VENV)/bin/memrelay-lab

.PHONY: all deps build build-tests demo test check test-rust test-lab test-clients test-bench lint bench fuzz docs clean

all: build

deps:
	@scripts/install-deps.sh

build: deps
	$(CARGO) build --release --workspace --bins

build-tests: deps
	$(CARGO) build --profile release-tests --workspace --bins

# A small real experiment end to end; prints where its report is.
demo: build
	@scripts/demo.sh

# Every suite, each stage timed (the times are printed at the end), independent stages side by
# side (docs/testing.md): scripts/test.sh.
test:
	@scripts/test.sh

# The edit loop, about 3 minutes once built: formatting, clippy, the unit tests and the Rust
# integration tests; it leaves out the lab, the Python clients, the client matrix and the bench
# tests (docs/testing.md).
check: lint
	$(CARGO) test --profile release-tests --workspace

# The report test opens report.html in a real headless browser: tests install Debian's chromium.
test-lab: export WITH_CHROMIUM := 1

# Style and lints are part of the tests: unformatted code or any clippy warning fails `make test`.
lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --release --workspace --all-targets -- -D warnings

test-rust: deps
	$(CARGO) test --profile release-tests --workspace

test-lab: build-tests
	MEMRELAY_BIN_DIR=$(TEST_BIN) $(VENV)/bin/python -m pytest lab/tests -q -rs --durations=12

# memrelay driven by real Python clients (pymemcache, meta-memcache) and libmemcached's
# memccp/memccat, against memcached as the reference (tests/python; builds nothing); then the
# client matrix (tests/clients: gomemcache, spymemcached, xmemcached, node memcached, memjs,
# pymemcache, pylibmc, built by scripts/install-clients.sh), a server killed and restarted.
test-clients: build-tests
	MEMRELAY_BIN_DIR=$(TEST_BIN) $(VENV)/bin/python -m pytest tests/python -q
	MEMRELAY_BIN_DIR=$(TEST_BIN) $(VENV)/bin/python -m pytest tests/clients -q -rs --durations=5

# The bench's peers do each row's job (keys read back from the servers) and its work check
# catches one that does not; memcached's proxy is built first when missing (scripts/build-memcached-proxy.sh).
test-bench: build-tests
	MEMRELAY_BIN_DIR=$(TEST_BIN) $(VENV)/bin/python -m pytest tests/bench -q -rs

# Side-by-side throughput, p99 and CPU per request of memcached, twemproxy, memcached's proxy
# (MEMCACHED_PROXY, else scripts/build-memcached-proxy.sh's build) and memrelay evented; about 13 minutes (BENCH_QUICK=1: about 1); then
# stalled handshakes, hostile metrics connections, clients that never read on shared server
# connections (results/bench/sharing), and how cost grows with value size, keys per
# get, idle connections and large replies (scripts/bench_memory.py, figures in results/bench/memory).
bench: build
	@scripts/bench.sh

# Runs every fuzz target for FUZZ_SECONDS each (nightly Rust and cargo-fuzz, installed if missing).
# New finds land in fuzz/corpus (not kept); copy the ones worth keeping into fuzz/seeds, which
# `make test` replays on stable Rust.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS := crates/protocol:parse_request crates/protocol:parse_reply crates/memrelay:client_stream crates/memrelay:access_rules crates/memrelay:client_certificate
fuzz:
	@rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
	@command -v cargo-fuzz >/dev/null || cargo +nightly install cargo-fuzz
	@set -e; for spec in $(FUZZ_TARGETS); do \
	  crate=$${spec%%:*}; target=$${spec##*:}; \
	  echo "fuzz: $$target ($$crate) for $(FUZZ_SECONDS) s"; \
	  mkdir -p $$crate/fuzz/corpus/$$target; \
	  (cd $$crate && cargo +nightly fuzz run $$target fuzz/corpus/$$target fuzz/seeds/$$target -- -max_total_time=$(FUZZ_SECONDS)); \
	done

# The option reference (docs/reference/*-options.md) from the built binaries' --help; `make test`
# fails while it differs from them (tests/python/test_docs.py).
docs: build
	python3 scripts/gen_option_docs.py --bin-dir $(CURDIR)/target/release

clean:
	$(CARGO) clean
	rm -rf $(VENV) results
