"""Where the programs a run drives are found: memcached, memrelay and memrelay-bench.

``memrelay`` and ``memrelay-bench`` are looked up in ``$MEMRELAY_BIN_DIR`` (the Makefile sets
it to target/release), then ``<repo>/target/release``, then ``$PATH``; ``memcached`` on
``$PATH``. A missing one is a :class:`BinaryNotFound` whose message says how to build or
install it. The proxies memrelay is compared with (twemproxy, memcached's proxy) are found by
`plumbing.binaries`, re-exported here. It imports nothing else of the lab, so the topology, the
processes, the runner and the preflight can all read it.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from ..plumbing.binaries import BinaryNotFound, find_proxy

__all__ = ["REPO", "Binaries", "BinaryNotFound", "find_binaries", "find_proxy"]

REPO = Path(__file__).resolve().parents[3]


@dataclass(frozen=True)
class Binaries:
    memcached: str
    memrelay: str
    bench: str


def find_binaries(bin_dir: str | Path | None = None) -> Binaries:
    """Locate memcached, memrelay and memrelay-bench (module docstring), or raise BinaryNotFound."""
    directories = []
    if bin_dir:
        directories.append(Path(bin_dir))
    if os.environ.get("MEMRELAY_BIN_DIR"):
        directories.append(Path(os.environ["MEMRELAY_BIN_DIR"]))
    directories.append(REPO / "target" / "release")

    def ours(name: str) -> str:
        for directory in directories:
            candidate = directory / name
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return str(candidate)
        found = shutil.which(name)
        if found:
            return found
        where = ", ".join(str(d) for d in directories)
        raise BinaryNotFound(f"{name} not found (looked in {where} and PATH); build it with `make build`")

    memcached = shutil.which("memcached")
    if not memcached:
        raise BinaryNotFound("memcached not found on PATH; install it with `make deps` (or apt-get install memcached)")
    return Binaries(memcached=memcached, memrelay=ours("memrelay"), bench=ours("memrelay-bench"))
