"""Where the proxies memrelay is compared with are found: twemproxy and memcached's proxy.

twemproxy is Debian's nutcracker (`make deps`). memcached's proxy is not packaged:
``$MEMCACHED_PROXY`` when set, else the build of scripts/build-memcached-proxy.sh, cached
outside the repository under a key of that script's contents (:func:`memcached_proxy_build`
computes the same key, so a changed script is a new build). A missing one is a
:class:`BinaryNotFound` whose message says how to get it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

__all__ = ["BUILD_SCRIPT", "HOW_TO_GET", "BinaryNotFound", "build_memcached_proxy", "find_proxy",
           "memcached_proxy_build"]

REPO = Path(__file__).resolve().parents[3]
BUILD_SCRIPT = REPO / "scripts" / "build-memcached-proxy.sh"
HOW_TO_GET = {
    "twemproxy": "install it with `make deps` (Debian's package nutcracker)",
    "memcached-proxy": "set MEMCACHED_PROXY to a memcached built with --enable-proxy, or build one with "
                       "scripts/build-memcached-proxy.sh (Debian's memcached source, about 30 s, cached "
                       "outside the repository)",
}


class BinaryNotFound(RuntimeError):
    """A program the lab or the bench needs is not built or not installed."""


def memcached_proxy_build() -> Path:
    """Where scripts/build-memcached-proxy.sh puts its build (there or not):
    ``${XDG_CACHE_HOME:-~/.cache}/memrelay/memcached-proxy/<key>/memcached``."""
    key = hashlib.sha256(BUILD_SCRIPT.read_bytes()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "memrelay" / "memcached-proxy" / key / "memcached"


def find_proxy(program: str) -> str:
    """The binary of ``program`` (``twemproxy`` or ``memcached-proxy``), or BinaryNotFound."""
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
        built = memcached_proxy_build()
        if os.access(built, os.X_OK):
            return str(built)
        raise BinaryNotFound(f"memcached's proxy not found (no {built}); {HOW_TO_GET[program]}")
    raise ValueError(f"no such proxy program {program!r}")


def build_memcached_proxy(timeout: float = 1200) -> str:
    """The memcached proxy's binary, built first when there is none (for tests that need it);
    BinaryNotFound with the build's last words when it cannot be built here."""
    try:
        return find_proxy("memcached-proxy")
    except BinaryNotFound:
        if os.environ.get("MEMCACHED_PROXY"):
            raise  # a named binary that is not there is the caller's to fix, not to build over
    build = subprocess.run([str(BUILD_SCRIPT)], capture_output=True, text=True, timeout=timeout)
    if build.returncode != 0:
        raise BinaryNotFound(f"memcached's proxy cannot be built here: {build.stdout[-300:]} {build.stderr[-300:]}")
    return find_proxy("memcached-proxy")
