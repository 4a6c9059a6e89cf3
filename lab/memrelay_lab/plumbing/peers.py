"""How each proxy is configured and started in front of memcached servers: twemproxy
(Debian's nutcracker), memcached's built-in proxy, and memrelay's routing options.

The routing is said once, in memrelay's terms (:class:`Routing`), and each program follows
it as far as it can. The lab (`experiment/_proxies.py`, from a configuration) and `make bench`
(`scripts/benchlib/peers.py`, from a row's layout) both start their peers from here.

| memrelay                      | twemproxy                       | memcached's proxy (memcached-proxy.lua) |
|-------------------------------|---------------------------------|-----------------------------------------|
| one server                    | that server                     | that server                             |
| distribution all              | one copy, ketama (cannot replicate) | writes to every server, answered when all answered; reads to one at random |
| ketama, R copies              | one copy, ketama (R > 1 cannot) | R pools over rotated server lists: writes to all R, reads from the first (any with read_any) |
| multi-gets                    | split by key hash               | split by the proxy into one request per key, each routed as above |
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import resources

__all__ = [
    "MAX_CONNECTIONS",
    "Routing",
    "memcached_proxy_command",
    "memcached_proxy_config",
    "memrelay_routing_options",
    "twemproxy_command",
    "twemproxy_config",
]

# Client connections memcached (a server or the proxy) accepts: its default 1,024 is below a
# large design's, and below the bench's connection-scaling row (1,000 plus the bench's own).
MAX_CONNECTIONS = 4096


@dataclass(frozen=True)
class Routing:
    """Where keys go, as memrelay's options say it."""

    distribution: str = "all"  # "all": every key on every server; "ketama": hashed
    copies: int = 1  # ketama: copies of each key (--replication)
    read_any: bool = False  # ketama: reads from any copy (--read-from any-replica), else the first
    sharded: bool = False  # memrelay's --sharded (its own connections per thread; no routing change)


def _as_root(as_root: bool | None) -> bool:
    return as_root if as_root is not None else hasattr(os, "geteuid") and os.geteuid() == 0


def twemproxy_config(address: str, port: int, servers: list[str]) -> str:
    """nutcracker's YAML: one pool on ``address:port``, ketama over ``servers`` (``host:port``).
    twemproxy keeps one copy of a key whatever the routing asks."""
    lines = "".join(f"    - {server}:1\n" for server in servers)
    return ("pool:\n"
            f"  listen: {address}:{port}\n"
            "  hash: md5\n  distribution: ketama\n  auto_eject_hosts: false\n"
            # One connection per server, as memrelay keeps.
            "  server_connections: 1\n"
            f"  servers:\n{lines}")


def twemproxy_command(binary: str, config_path: str, address: str, stats_port: int) -> list[str]:
    """nutcracker with that configuration; ``stats_port``: its statistics port (it always opens one)."""
    return [binary, "-c", config_path, "-s", str(stats_port), "-a", address, "-v", "4"]


def memcached_proxy_config(servers: list[str], routing: Routing) -> str:
    """The Lua configuration of memcached's proxy: the settings table of this routing in front
    of memcached-proxy.lua (which says what it does with them)."""
    entries = ", ".join('{{"{}", "{}"}}'.format(*server.rsplit(":", 1)) for server in servers)
    mode = "all" if len(servers) == 1 or routing.distribution == "all" else "hashed"
    copies = 1 if mode == "all" else routing.copies
    read_any = "true" if routing.read_any else "false"
    settings = (f"-- written by memrelay_lab.plumbing.peers\n"
                f"settings = {{ servers = {{ {entries} }}, mode = \"{mode}\", copies = {copies}, "
                f"read_any = {read_any} }}\n\n")
    return settings + resources.files(__package__).joinpath("memcached-proxy.lua").read_text(encoding="utf-8")


def memcached_proxy_command(binary: str, address: str, port: int, threads: int, config_path: str,
                            as_root: bool | None = None) -> list[str]:
    """memcached's proxy on ``address:port`` with ``threads`` workers, TCP only; ``as_root``: it
    runs as root (default: this process does), which memcached refuses without ``-u root``."""
    argv = [binary, "-l", address, "-p", str(port), "-U", "0", "-t", str(threads),
            "-c", str(MAX_CONNECTIONS), "-o", f"proxy_config={config_path}"]
    return argv + (["-u", "root"] if _as_root(as_root) else [])


def memrelay_routing_options(routing: Routing, replication: str | None = None) -> list[str]:
    """memrelay's options for the routing; ``replication``: the label to pass (``all``, ``half``)
    where the caller has one, else the number of copies."""
    argv = ["--sharded"] if routing.sharded else []
    argv += ["--distribution", routing.distribution]
    if routing.distribution == "ketama":
        argv += ["--replication", replication or str(routing.copies),
                 "--read-from", "any-replica" if routing.read_any else "primary"]
    return argv
