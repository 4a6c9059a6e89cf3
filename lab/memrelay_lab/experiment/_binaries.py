"""Where the programs a run drives are found: memcached, memrelay and memrelay-bench.

``memrelay`` and ``memrelay-bench`` are looked up in ``$MEMRELAY_BIN_DIR`` (the Makefile sets
it to target/release), then ``<repo>/target/release``, then ``$PATH``; ``memcached`` on
``$PATH``. A missing one is a :class:`BinaryNotFound` whose message says how to build or
install it. A leaf: it imports nothing of the lab, so the topology, the processes, the runner
and the preflight can all read it.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

__all__ = ["REPO", "Binaries", "BinaryNotFound", "find_binaries", "find_proxy"]

REPO = Path(__file__).resolve().parents[3]


class BinaryNotFound(RuntimeError):
    """A program the lab needs is not built or not installed."""


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


# Where scripts/build-memcached-proxy.sh puts memcached's proxy.
BUILT_MEMCACHED_PROXY = REPO / "target" / "memcached-proxy" / "memcached"
HOW_TO_GET = {
    "twemproxy": "install it with `make deps` (Debian's package nutcracker)",
    "memcached-proxy": "set MEMCACHED_PROXY to a memcached built with --enable-proxy, or build one with "
                       "scripts/build-memcached-proxy.sh (Debian's memcached source, into target/memcached-proxy)",
}


def find_proxy(program: str) -> str:
    """The binary of a middleware other than memrelay, as `make bench` finds it: twemproxy is
    Debian's nutcracker; memcached's proxy is $MEMCACHED_PROXY, else the one
    scripts/build-memcached-proxy.sh built. BinaryNotFound says how to get it."""
    if program == "twemproxy":
        for candidate in (shutil.which("nutcracker"), "/usr/sbin/nutcracker"):
            if candidate and os.access(candidate, os.X_OK):
                return candidate
        raise BinaryNotFound(f"twemproxy (nutcracker) not found; {HOW_TO_GET[program]}")
    if program == "memcached-proxy":
        named = os.environ.get("MEMCACHED_PROXY")
        if named:
            if os.access(named, os.X_OK):
                return named
            raise BinaryNotFound(f"MEMCACHED_PROXY={named} is not an executable; {HOW_TO_GET[program]}")
        if os.access(BUILT_MEMCACHED_PROXY, os.X_OK):
            return str(BUILT_MEMCACHED_PROXY)
        raise BinaryNotFound(f"memcached's proxy not found; {HOW_TO_GET[program]}")
    raise ValueError(f"no such middleware program {program!r}")
