"""The middlewares other than memrelay: twemproxy and memcached's proxy, routing as memrelay does.

``middleware = "twemproxy" | "memcached-proxy"`` starts that program where memrelay would
run, in front of the same servers, with the routing of the configuration's memrelay options
as far as the program can follow it (`routing` says what it does, for the manifest):

| memrelay                        | twemproxy                         | memcached's proxy                       |
|---------------------------------|-----------------------------------|-----------------------------------------|
| one server                      | that server                       | that server                             |
| distribution all (every key on every server: writes to all, reads balanced) | one copy, ketama-hashed (twemproxy cannot replicate) | writes to every server, answered when all answered; reads to one at random |
| ketama, R copies                | one copy, ketama (R > 1 cannot)   | R pools over rotated server lists: writes to all R, reads from the first (any with read_from = any-replica) |
| multi-gets                      | split by key hash                 | split by the proxy into one request per key, each routed as above |

Neither program measures inside itself as memrelay does (no summary.json): the lab measures
them black-box, from the clients, each process's processor time (`_cpu`, role ``proxy``) and
the links. twemproxy is one event loop; memcached's proxy runs one worker thread per usable
core (memrelay's evented default). memcached's proxy is configured by the project's own Lua
file (``proxy/memcached-proxy.lua``) behind a table of this run's servers.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import resources

from ._expand import Configuration

__all__ = ["BLACK_BOX", "ProxyLaunch", "proxy_launch", "routing"]

#: The middleware programs measured from outside (no internal timestamps).
BLACK_BOX = ("twemproxy", "memcached-proxy")
# Client connections memcached's proxy accepts (its default 1,024 is below a large design's).
MAX_CONNECTIONS = 4096


@dataclass(frozen=True)
class ProxyLaunch:
    """What starting one proxy takes: its configuration file's name and text, and its argv
    (with ``{config}`` where the file's path on the host goes)."""

    config_name: str
    config_text: str
    argv: list[str]
    routing: str

    def command(self, config_path: str) -> list[str]:
        return [config_path if a == "{config}" else a.replace("{config}", config_path) for a in self.argv]


def routing(config: Configuration, program: str) -> str:
    """What the program does with keys in this configuration (module docstring's table)."""
    copies = config.replicas or 1
    if config.servers == 1:
        return "one server"
    if program == "twemproxy":
        lost = " (cannot replicate: one copy)" if copies > 1 else ""
        return f"ketama hashing over {config.servers} servers{lost}"
    if config.distribution == "all":
        return f"writes to all {config.servers} servers, reads from one at random"
    reads = "any copy" if config.read_from == "any-replica" else "the first copy"
    return f"hashed over {config.servers} servers, {copies} cop{'y' if copies == 1 else 'ies'}, reads from {reads}"


def proxy_launch(program: str, binary: str, config: Configuration, address: str, port: int, stats_port: int,
                 servers: list[str], usable_cores: int | None = None, as_root: bool | None = None) -> ProxyLaunch:
    """The launch of ``program`` listening on ``address:port`` in front of ``servers``
    (``host:port``); ``stats_port``: twemproxy's statistics port (it always opens one)."""
    if as_root is None:
        as_root = hasattr(os, "geteuid") and os.geteuid() == 0
    if program == "twemproxy":
        lines = "".join(f"    - {server}:1\n" for server in servers)
        text = ("pool:\n"
                f"  listen: {address}:{port}\n"
                "  hash: md5\n  distribution: ketama\n  auto_eject_hosts: false\n"
                # One connection per server, as memrelay keeps (and the bench's twemproxy row).
                "  server_connections: 1\n"
                f"  servers:\n{lines}")
        argv = [binary, "-c", "{config}", "-s", str(stats_port), "-a", address, "-v", "4"]
        return ProxyLaunch("twemproxy.yml", text, argv, routing(config, program))
    if program == "memcached-proxy":
        threads = usable_cores or len(os.sched_getaffinity(0))
        text = _lua_settings(config, servers) + resources.files(__package__).joinpath(
            "proxy/memcached-proxy.lua").read_text(encoding="utf-8")
        argv = [binary, "-l", address, "-p", str(port), "-U", "0", "-t", str(threads),
                "-c", str(MAX_CONNECTIONS), "-o", "proxy_config={config}"]
        return ProxyLaunch("memcached-proxy.lua", text, argv + (["-u", "root"] if as_root else []),
                           routing(config, program))
    raise ValueError(f"no such middleware program {program!r}")


def _lua_settings(config: Configuration, servers: list[str]) -> str:
    entries = ", ".join('{{"{}", "{}"}}'.format(*server.rsplit(":", 1)) for server in servers)
    mode = "all" if config.servers == 1 or config.distribution == "all" else "hashed"
    copies = 1 if mode == "all" else (config.replicas or 1)
    read_any = "true" if config.read_from == "any-replica" else "false"
    return (f"-- written by memrelay-lab for this run\n"
            f"lab = {{ servers = {{ {entries} }}, mode = \"{mode}\", copies = {copies}, read_any = {read_any} }}\n\n")
