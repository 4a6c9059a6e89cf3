#!/usr/bin/env bash
# `make bench`: memcached direct, twemproxy, memcached's proxy ($MEMCACHED_PROXY) and memrelay evented
# with 1 and K threads side by side (see scripts/bench_proxies.py --help). Extra arguments are
# passed on, e.g. --profile or --measurement-cost.
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 scripts/bench_proxies.py "$@"
