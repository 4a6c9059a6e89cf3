#!/usr/bin/env bash
# `make bench`: memcached direct, twemproxy and memrelay's two engines side by side (see
# scripts/bench_proxies.py --help). Extra arguments are passed on, e.g. --measurement-cost.
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 scripts/bench_proxies.py "$@"
