"""Bytes every process sent and received over TCP, from the kernel's own per-socket counters.

The programs of a run talk only over loopback TCP, and the kernel keeps, per socket, the bytes
the peer acknowledged and the bytes received (``tcp_info``'s ``tcpi_bytes_acked`` and
``tcpi_bytes_received``, read through the sock_diag netlink interface, pyroute2's
`DiagSocket`). psutil names each process's connections by their addresses; the counters of a
process's sockets added up are its network traffic. (``/proc/<pid>/io`` would not do: memcached
writes with ``sendmsg``, which those counters miss.) A connection opened during the interval
counts from zero; one closed during it loses its counters, which the load phase never does.
"""

from __future__ import annotations

import socket

import psutil
from pyroute2 import DiagSocket

__all__ = ["tcp_bytes"]

_INET_DIAG_INFO = 2  # the tcp_info extension
_ESTABLISHED = 1


def _socket_counters() -> dict[tuple, tuple[int, int]]:
    """(local ip, local port, remote ip, remote port) -> (bytes received, bytes acknowledged)."""
    counters = {}
    with DiagSocket() as diag:
        diag.bind()
        for family in (socket.AF_INET, socket.AF_INET6):
            for message in diag.get_sock_stats(
                family=family, states=1 << _ESTABLISHED, extensions=1 << (_INET_DIAG_INFO - 1)
            ):
                info = message.get_attr("INET_DIAG_INFO")
                if info is None:
                    continue
                key = (message["idiag_src"], message["idiag_sport"], message["idiag_dst"], message["idiag_dport"])
                counters[key] = (int(info.get("tcpi_bytes_received") or 0), int(info.get("tcpi_bytes_acked") or 0))
    return counters


def tcp_bytes(pids: dict[str, int], attempts: int = 3) -> dict[str, tuple[int, int]]:
    """Per process name: (bytes received, bytes sent) over all its established TCP connections,
    since each connection opened.

    A socket dump is not atomic: a socket can be missing from it, and a connection can open or
    close between psutil's listing and the dump. Each process's figure comes from the first of
    up to `attempts` dumps that holds all of its listed connections (never a mix of dumps, which
    would count some sockets later than others); a process never complete, gone, or whose
    connections cannot be read is left out rather than counted short."""
    connections: dict[str, list[tuple]] = {}
    for name, pid in pids.items():
        try:
            listed = psutil.Process(pid).net_connections(kind="tcp")
        except psutil.Error:
            continue
        connections[name] = [(c.laddr.ip, c.laddr.port, c.raddr.ip, c.raddr.port)
                             for c in listed if c.raddr and c.status == psutil.CONN_ESTABLISHED]
    totals: dict[str, tuple[int, int]] = {}
    for _ in range(attempts):
        try:
            counters = _socket_counters()
        except (OSError, RuntimeError):
            continue
        for name, keys in connections.items():
            if name not in totals and all(key in counters for key in keys):
                totals[name] = (sum(counters[k][0] for k in keys), sum(counters[k][1] for k in keys))
        if len(totals) == len(connections):
            break
    return totals
