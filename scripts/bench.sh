#!/usr/bin/env bash
# `make bench`: memcached direct, twemproxy, memcached's proxy ($MEMCACHED_PROXY, else the build of
# scripts/build-memcached-proxy.sh) and memrelay evented
# with 1 and K threads side by side (see scripts/bench_proxies.py --help; extra arguments are
# passed on to it, e.g. --profile or --measurement-cost), then other clients' p99 beside 1,000
# stalled TLS handshakes (scripts/bench_handshakes.py), then the metrics endpoint's scrape p99
# beside 1,000 hostile connections, over HTTP and HTTPS (scripts/bench_metrics.py), then honest
# clients beside hostile ones that pipeline large gets and never read, on shared server connections
# (scripts/bench_sharing.py), then how each
# target's cost grows with value size, keys per get, idle connections and large replies, with
# figures (scripts/bench_memory.py).
#
# In the lab's Python: the scripts start their peers with the lab's memrelay_lab.plumbing, and
# bench_memory draws with matplotlib.
set -euo pipefail
cd "$(dirname "$0")/.."
python=lab/.venv/bin/python
[ -x "$python" ] || { echo "bench: error: $python is missing; run \`make deps\`" >&2; exit 1; }
"$python" scripts/bench_proxies.py "$@"
# Slow and half-open TLS handshakes beside ordinary clients (their p99 with and without).
"$python" scripts/bench_handshakes.py
# Idle and dribbling connections to /metrics beside honest scrapes (their p99 with and without).
"$python" scripts/bench_metrics.py
"$python" scripts/bench_metrics.py --https
# Honest clients beside clients that never read (or read slowly) on shared server connections.
"$python" scripts/bench_sharing.py
# CPU per request and RSS as values, keys per get and connections grow (results/bench/memory/).
"$python" scripts/bench_memory.py
