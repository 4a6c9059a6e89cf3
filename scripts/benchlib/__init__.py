"""The parts of `make bench` (scripts/bench_proxies.py): rows, peers, work checks, summary."""
