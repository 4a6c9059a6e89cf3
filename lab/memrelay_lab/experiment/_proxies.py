"""The middlewares other than memrelay: twemproxy and memcached's proxy, routing as memrelay does.

``middleware = "twemproxy" | "memcached-proxy"`` starts that program where memrelay would
run, in front of the same servers, with the routing of the configuration's memrelay options
(``Configuration.key_routing``) as far as the program can follow it: how each is configured and
started, and the table of what each does with keys, is `plumbing.peers` (shared with `make
bench`); `routing` says it in words, for the manifest.

Neither program measures inside itself as memrelay does (no summary.json): the lab measures
them black-box, from the clients, each process's processor time (`_cpu`, role ``proxy``) and
the links. twemproxy is one event loop; memcached's proxy runs one worker thread per usable
core (memrelay's evented default).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..plumbing.peers import memcached_proxy_command, memcached_proxy_config, twemproxy_command, twemproxy_config
from ._expand import Configuration

__all__ = ["BLACK_BOX", "ProxyLaunch", "proxy_launch", "routing"]

#: The middleware programs measured from outside (no internal timestamps).
BLACK_BOX = ("twemproxy", "memcached-proxy")


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
    """What the program does with keys in this configuration (plumbing.peers's table), in words."""
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
    if program == "twemproxy":
        argv = twemproxy_command(binary, "{config}", address, stats_port)
        return ProxyLaunch("twemproxy.yml", twemproxy_config(address, port, servers), argv, routing(config, program))
    if program == "memcached-proxy":
        threads = usable_cores or len(os.sched_getaffinity(0))
        argv = memcached_proxy_command(binary, address, port, threads, "{config}", as_root)
        return ProxyLaunch("memcached-proxy.lua", memcached_proxy_config(servers, config.key_routing), argv,
                           routing(config, program))
    raise ValueError(f"no such middleware program {program!r}")
