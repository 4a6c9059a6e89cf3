"""How each bench target is started in front of the row's memcached servers.

Targets: `memcached` (the servers themselves, no proxy: the ceiling, not a peer), `twemproxy`
(Debian's nutcracker), `memcached-proxy` (memcached's built-in proxy, not packaged: $MEMCACHED_PROXY
or the build of scripts/build-memcached-proxy.sh), and memrelay as `memrelay-ENGINE[/N][+stats]`.
Each row's layout is said as a routing (`ROUTING`); how a peer is configured and started for
it is the lab's `memrelay_lab.plumbing.peers`, which the lab's experiments use too.

`command(target, layout, ...)` gives the argv, or a `Cannot` with the reason when the target
cannot serve the layout (twemproxy has no replication, nor TLS).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from memrelay_lab.plumbing.binaries import HOW_TO_GET, BinaryNotFound, find_proxy
from memrelay_lab.plumbing.peers import (
    MAX_CONNECTIONS,
    Routing,
    memcached_proxy_command,
    memcached_proxy_config,
    memrelay_routing_options,
    twemproxy_command,
    twemproxy_config,
)
from memrelay_lab.plumbing.processes import free_port

from . import tls as tlslib
from .beforeafter import SUFFIX, is_baseline

__all__ = ["CORES", "MAX_CONNECTIONS", "MEMCACHED_PROXY_ABSENT", "Cannot", "command", "find", "is_peer", "memcached_proxy_binary",
           "with_option"]

# The proxy's thread count: one per core, as memrelay's default.
CORES = os.cpu_count() or 1
# memcached-proxy's cells when it is not there, and how to get it.
MEMCACHED_PROXY_ABSENT = f"absent: {HOW_TO_GET['memcached-proxy']}"
# Each layout (scripts/benchlib/rows.py) in memrelay's terms.
ROUTING = {
    "single": Routing(),
    "tls1": Routing(),
    "all3": Routing(),  # every key on every server: writes to all three
    "shard3": Routing("ketama", sharded=True),
    "r2of3": Routing("ketama", copies=2, read_any=True),
}


# `memrelay-...+routes`: the traffic's keys (memrelay-bench's `memtier-` prefix) go to the default
# pool, the row's servers, through one of ROUTES routes of a few prefix lengths; the others send
# other prefixes to two more pools. What the routes cost shows against the same target without.
ROUTES = 100
ROUTED_PREFIX = "memtier-"


def routes_config(spare: list[int]) -> str:
    """Two pools of one server each (`spare` ports) and ROUTES routes, one of them the traffic's."""
    lines = []
    for name, port in zip(("b", "c"), spare):
        lines += [f"[pools.{name}]", f'servers = ["127.0.0.1:{port}"]', ""]
    prefixes = [ROUTED_PREFIX] + [f"{'x' * (i % 7)}p{i}:" for i in range(ROUTES - 1)]
    for i, prefix in enumerate(prefixes):
        pool = "default" if prefix == ROUTED_PREFIX else ("b", "c", "default")[i % 3]
        lines += ["[[routes]]", f'prefix = "{prefix}"', f'pool = "{pool}"', ""]
    return "\n".join(lines)


@dataclass(frozen=True)
class Cannot:
    """A cell the target cannot fill, and why (shown in the table)."""

    reason: str


def is_peer(target: str) -> bool:
    """Another proxy memrelay is compared against (memcached direct is the ceiling, not a peer)."""
    return target in ("twemproxy", "memcached-proxy")


def memcached_proxy_binary() -> str | None:
    """memcached's proxy ($MEMCACHED_PROXY, else the cached build), or None (its cells are then skipped)."""
    try:
        return find_proxy("memcached-proxy")
    except BinaryNotFound:
        return None


def memrelay_tls(argv: list[str], binary: str, engine: str, listen: int, work: Path) -> list[str] | Cannot:
    """memrelay taking TLS on `listen` (its plain listener elsewhere) and speaking TLS to the servers."""
    if engine != "evented":
        return Cannot("cannot: TLS from clients needs --engine evented")
    if not tlslib.memrelay_speaks_tls_to_servers(binary):
        return Cannot("skipped: this memrelay has no --server-tls-ca (TLS to servers not built in yet)")
    f = tlslib.files(work)
    plain = argv.index("--listen") + 1
    argv[plain] = f"127.0.0.1:{free_port()}"
    return argv + ["--tls-listen", f"127.0.0.1:{listen}", "--tls-cert", str(f.cert), "--tls-key", str(f.key),
                   "--server-tls-ca", str(f.ca)]


def with_option(argv: list[str], option: str, value: str) -> list[str]:
    """argv with `option value` set: replaced where the option is there, appended where not."""
    if option in argv:
        argv = list(argv)
        argv[argv.index(option) + 1] = value
        return argv
    return argv + [option, value]


def find(binary: str, bin_dir: Path, hint: str) -> str:
    for candidate in (bin_dir / binary, Path("/usr/sbin") / binary, Path("/usr/bin") / binary):
        if candidate.exists():
            return str(candidate)
    found = shutil.which(binary)
    if not found:
        raise SystemExit(f"bench: error: {binary} not found; {hint}")
    return found


def command(target: str, layout: str, listen: int, servers: list[int], work: Path, bin_dir: Path,
            baseline_bin: Path | None = None, spare: list[int] | None = None) -> list[str] | Cannot:
    """The argv starting `target` on 127.0.0.1:`listen` in front of `servers` (ports); `spare`:
    other servers, for the pools of `memrelay-...+routes`."""
    tag = f"{target}-{layout}".replace("/", "-")
    if layout == "tls1" and target == "twemproxy":
        return Cannot("cannot: twemproxy speaks no TLS")
    if layout == "tls1" and target == "memcached-proxy":
        return Cannot("cannot: memcached's proxy is not set up for TLS (client and backend) here")
    address = "127.0.0.1"
    servers_at = [f"{address}:{port}" for port in servers]
    if target == "twemproxy":
        if layout in ("all3", "r2of3"):
            return Cannot("cannot: twemproxy keeps one copy of a key (no replication)")
        (work / f"{tag}.yml").write_text(twemproxy_config(address, listen, servers_at))
        return twemproxy_command(find("nutcracker", bin_dir, "run `make deps`"), str(work / f"{tag}.yml"), address,
                                 free_port())
    if target == "memcached-proxy":
        binary = memcached_proxy_binary()
        if binary is None:
            return Cannot(MEMCACHED_PROXY_ABSENT)
        (work / f"{tag}.lua").write_text(memcached_proxy_config(servers_at, ROUTING[layout]))
        return memcached_proxy_command(binary, address, listen, CORES, str(work / f"{tag}.lua"))
    if target.startswith("memrelay"):
        # memrelay-ENGINE[/N][+stats][@baseline]: N workers (pool) or event threads (evented).
        baseline = is_baseline(target)
        binary = str(baseline_bin / "memrelay") if baseline else find("memrelay", bin_dir, "run `make build`")
        engine, _, stats = target.removeprefix("memrelay-").removesuffix(SUFFIX).partition("+")
        engine, _, count = engine.partition("/")
        argv = [binary, "--engine", engine, "--listen", f"127.0.0.1:{listen}"]
        argv += [a for port in servers for a in ("--server", f"127.0.0.1:{port}")]
        argv += memrelay_routing_options(ROUTING[layout])
        argv += ["--workers", count or "16"] if engine == "pool" else ["--threads", count or str(CORES)]
        if stats == "stats":
            argv += ["--stats-dir", str(work / f"stats-{tag}")]
        if stats == "routes":
            if len(spare or []) < 2:
                return Cannot("cannot: the routes' two extra pools need two more servers")
            config = work / f"{tag}-routes.toml"
            config.write_text(routes_config(spare[:2]))
            argv += ["--config", str(config)]
        if layout == "tls1":
            return memrelay_tls(argv, binary, engine, listen, work)
        return argv
    raise ValueError(f"unknown target {target!r}")
