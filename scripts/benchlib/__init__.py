"""The parts of `make bench` (scripts/bench_*.py): rows, peers, measurements, work checks, summaries,
memory, many connections, hostile connections, figures."""
