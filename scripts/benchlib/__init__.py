"""The parts of `make bench` (scripts/bench_*.py): rows, peers, measurements, work checks, summaries,
memory, many connections, hostile connections, figures.

What the lab shares with the bench (how the peers are configured and started, where their
binaries are, processes and ports) is the lab's `memrelay_lab.plumbing`, taken from this
checkout's lab/; the scripts therefore run with the lab's Python (lab/.venv/bin/python)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "lab"))
try:
    import memrelay_lab.plumbing  # noqa: F401
except ImportError as missing:
    raise SystemExit(f"bench: error: the lab's Python is needed ({missing}); run with lab/.venv/bin/python "
                     "(`make deps` makes it)") from None
