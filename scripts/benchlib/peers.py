"""How each bench target is started in front of the row's memcached servers.

Targets: `memcached` (the servers themselves, no proxy: the ceiling, not a peer), `twemproxy`
(Debian's nutcracker), `memcached-proxy` (memcached's built-in proxy with a routelib Lua
configuration written here; its binary is taken from $MEMCACHED_PROXY, a memcached built with
`--enable-proxy`, since none is packaged), and memrelay as `memrelay-ENGINE[/N][+stats]`.

`command(target, layout, ...)` gives the argv, or a `Cannot` with the reason when the target
cannot serve the layout (twemproxy has no replication, nor TLS).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from . import tls as tlslib
from .beforeafter import SUFFIX, is_baseline
from .processes import free_port

# The proxy's thread count: one per core, as memrelay's default.
CORES = os.cpu_count() or 1
# Client connections memcached (direct or proxy) accepts; its default 1,024 is below the
# connection-scaling row's 1,000 plus the bench's own.
MAX_CONNECTIONS = 4096


@dataclass(frozen=True)
class Cannot:
    """A cell the target cannot fill, and why (shown in the table)."""

    reason: str


def is_peer(target: str) -> bool:
    """Another proxy memrelay is compared against (memcached direct is the ceiling, not a peer)."""
    return target in ("twemproxy", "memcached-proxy")


def memcached_proxy_binary() -> str | None:
    """$MEMCACHED_PROXY if it names an executable, else None (its cells are then skipped)."""
    path = os.environ.get("MEMCACHED_PROXY")
    return path if path and os.access(path, os.X_OK) else None


def twemproxy_config(layout: str, listen: int, servers: list[int]) -> str | Cannot:
    if layout in ("all3", "r2of3"):
        return Cannot("cannot: twemproxy keeps one copy of a key (no replication)")
    lines = "".join(f"   - 127.0.0.1:{port}:1\n" for port in servers)
    return (
        "pool:\n"
        f"  listen: 127.0.0.1:{listen}\n"
        "  hash: md5\n  distribution: ketama\n  auto_eject_hosts: false\n"
        "  server_connections: 1\n"
        f"  servers:\n{lines}"
    )


def memcached_proxy_config(layout: str, servers: list[int]) -> str:
    """A routelib configuration (memcached's proxy) doing the layout's job.

    `r2of3` without a replica-set primitive: two pools over the same three servers, the second
    with the list rotated by one. A pool picks a backend by the key's hash and the list's length
    alone, so a key hashed to position i lands on server i in the first and server i+1 in the
    second: two distinct servers per key, like R=2. Writes go to both and wait for both
    (route_allsync), reads to either at random (route_random)."""
    addr = [f'"127.0.0.1:{port}"' for port in servers]
    if layout == "single":
        return f"pools{{ main = {{ backends = {{ {addr[0]} }} }} }}\nroutes{{ default = route_direct{{ child = \"main\" }} }}\n"
    if layout == "shard3":
        return (f"pools{{ main = {{ backends = {{ {', '.join(addr)} }} }} }}\n"
                "routes{ default = route_direct{ child = \"main\" } }\n")
    if layout == "all3":
        pools = ", ".join(f"s{i} = {{ backends = {{ {a} }} }}" for i, a in enumerate(addr))
        return (f"pools{{ {pools} }}\n"
                "routes{\n"
                "  cmap = { set = route_allsync{ children = { \"s0\", \"s1\", \"s2\" } } },\n"
                "  default = route_direct{ child = \"s0\" },\n"
                "}\n")
    if layout == "r2of3":
        rotated = addr[1:] + addr[:1]
        return (f"pools{{\n  ring0 = {{ backends = {{ {', '.join(addr)} }} }},\n"
                f"  ring1 = {{ backends = {{ {', '.join(rotated)} }} }},\n}}\n"
                "routes{\n"
                "  cmap = { set = route_allsync{ children = { \"ring0\", \"ring1\" } } },\n"
                "  default = route_random{ children = { \"ring0\", \"ring1\" } },\n"
                "}\n")
    raise ValueError(layout)


def memrelay_arguments(layout: str, servers: list[int]) -> list[str]:
    argv = [a for port in servers for a in ("--server", f"127.0.0.1:{port}")]
    if layout == "r2of3":
        argv += ["--distribution", "ketama", "--replication", "2", "--read-from", "any-replica"]
    elif layout == "shard3":
        argv += ["--distribution", "ketama", "--sharded"]
    return argv  # single and all3: the default distribution `all`


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
            baseline_bin: Path | None = None) -> list[str] | Cannot:
    """The argv starting `target` on 127.0.0.1:`listen` in front of `servers` (ports)."""
    tag = f"{target}-{layout}".replace("/", "-")
    if layout == "tls1" and target == "twemproxy":
        return Cannot("cannot: twemproxy speaks no TLS")
    if layout == "tls1" and target == "memcached-proxy":
        return Cannot("cannot: memcached's proxy is not set up for TLS (client and backend) here")
    if target == "twemproxy":
        conf = twemproxy_config(layout, listen, servers)
        if isinstance(conf, Cannot):
            return conf
        (work / f"{tag}.yml").write_text(conf)
        return [find("nutcracker", bin_dir, "run `make deps`"), "-c", str(work / f"{tag}.yml"),
                "-s", str(free_port()), "-o", str(work / f"{tag}.log")]
    if target == "memcached-proxy":
        binary = memcached_proxy_binary()
        if binary is None:
            return Cannot("absent: set MEMCACHED_PROXY to a memcached built with --enable-proxy")
        (work / f"{tag}.lua").write_text(memcached_proxy_config(layout, servers))
        argv = [binary, "-l", "127.0.0.1", "-p", str(listen), "-U", "0", "-t", str(CORES),
                "-c", str(MAX_CONNECTIONS), "-o", f"proxy_config=routelib,proxy_arg={work / f'{tag}.lua'}"]
        return argv + (["-u", "root"] if os.geteuid() == 0 else [])
    if target.startswith("memrelay"):
        # memrelay-ENGINE[/N][+stats][@baseline]: N workers (pool) or event threads (evented).
        baseline = is_baseline(target)
        binary = str(baseline_bin / "memrelay") if baseline else find("memrelay", bin_dir, "run `make build`")
        engine, _, stats = target.removeprefix("memrelay-").removesuffix(SUFFIX).partition("+")
        engine, _, count = engine.partition("/")
        argv = [binary, "--engine", engine, "--listen", f"127.0.0.1:{listen}"] + memrelay_arguments(layout, servers)
        argv += ["--workers", count or "16"] if engine == "pool" else ["--threads", count or str(CORES)]
        if stats == "stats":
            argv += ["--stats-dir", str(work / f"stats-{tag}")]
        if layout == "tls1":
            return memrelay_tls(argv, binary, engine, listen, work)
        return argv
    raise ValueError(f"unknown target {target!r}")
