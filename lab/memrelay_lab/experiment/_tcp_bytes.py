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
import time

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


def tcp_bytes(pids: dict[str, int], attempts: int = 3) -> tuple[float, dict[str, tuple[int, int]]]:
    """The time of the reading (unix seconds) and, per process name, (bytes received, bytes
    sent) over all its established TCP connections, since each connection opened.

    The machine's connections are listed once (psutil, with their owners' pids), then the
    counters are dumped, timed when the dump starts: a slow listing must not shift the time
    the counters belong to. A socket dump is not atomic: a socket can be missing from it, and a
    connection can open or close between the listing and the dump. Each process's figure comes
    from the first of up to `attempts` dumps that holds all of its listed connections (never a
    mix of dumps, which would read some sockets later than others); a process never complete,
    gone, or not listed is left out rather than counted short."""
    wanted_pids = {pid: name for name, pid in pids.items()}
    connections: dict[str, list[tuple]] = {name: [] for name in pids}
    try:
        listed = psutil.net_connections(kind="tcp")
    except psutil.Error:
        return time.time(), {}
    for connection in listed:
        name = wanted_pids.get(connection.pid)
        if name is not None and connection.raddr and connection.status == psutil.CONN_ESTABLISHED:
            connections[name].append(
                (connection.laddr.ip, connection.laddr.port, connection.raddr.ip, connection.raddr.port))
    connections = {name: keys for name, keys in connections.items() if psutil.pid_exists(pids[name])}
    totals: dict[str, tuple[int, int]] = {}
    at = None
    for _ in range(attempts):
        started = time.time()
        try:
            counters = _socket_counters()
        except (OSError, RuntimeError):
            continue
        at = started if at is None else at
        for name, keys in connections.items():
            if name not in totals and all(key in counters for key in keys):
                totals[name] = (sum(counters[k][0] for k in keys), sum(counters[k][1] for k in keys))
        if len(totals) == len(connections):
            break
    return (at if at is not None else time.time()), totals
