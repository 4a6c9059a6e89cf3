"""Bytes every process sent and received over TCP, from the kernel's own per-socket counters.

The programs of a run talk only over loopback TCP, and the kernel keeps, per socket, the bytes
the peer acknowledged and the bytes received (``tcp_info``'s ``tcpi_bytes_acked`` and
``tcpi_bytes_received``, read through the sock_diag netlink interface, pyroute2's
`DiagSocket`, for established connections only). A process's sockets are the ``socket:[inode]``
entries of ``/proc/<pid>/fd``; the dump names each socket's inode, so the counters of a
process's sockets added up are its network traffic.

Why not simpler means: ``/proc/<pid>/io`` misses memcached's writes (it writes with
``sendmsg``); psutil's connection listing parses the machine's whole ``/proc/net/tcp``, which
after a test suite holds thousands of TIME_WAIT entries and took up to a second, long enough
for the reading to land after the load had ended.

A connection opened during the interval counts from zero; one closed during it loses its
counters, which the load phase never does (the sampler reads inside the kept interval).
"""

from __future__ import annotations

import os
import socket
import time

from pyroute2 import DiagSocket

__all__ = ["tcp_bytes"]

_INET_DIAG_INFO = 2  # the tcp_info extension
_ESTABLISHED = 1


def _socket_counters() -> dict[int, tuple[int, int]]:
    """Socket inode -> (bytes received, bytes acknowledged), established TCP connections."""
    counters = {}
    with DiagSocket() as diag:
        diag.bind()
        for family in (socket.AF_INET, socket.AF_INET6):
            for message in diag.get_sock_stats(
                family=family, states=1 << _ESTABLISHED, extensions=1 << (_INET_DIAG_INFO - 1)
            ):
                info = message.get_attr("INET_DIAG_INFO")
                if info is not None:
                    counters[int(message["idiag_inode"])] = (
                        int(info.get("tcpi_bytes_received") or 0), int(info.get("tcpi_bytes_acked") or 0))
    return counters


def _socket_inodes(pid: int) -> set[int] | None:
    """The inodes of the sockets `pid` holds open; None when the process is gone."""
    try:
        descriptors = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return None
    inodes = set()
    for descriptor in descriptors:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{descriptor}")
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:["):
            inodes.add(int(target[len("socket:["):-1]))
    return inodes


def _same_network(pid: int) -> bool:
    try:
        return os.readlink(f"/proc/{pid}/ns/net") == os.readlink("/proc/self/ns/net")
    except OSError:
        return False


def tcp_bytes(pids: dict[str, int]) -> tuple[float, dict[str, tuple[int, int]]]:
    """The time of the reading (unix seconds, the middle of the dump) and, per process
    name, (bytes received, bytes sent) over all its established TCP connections since each
    opened. A process that is gone, or in another network namespace (a testbed host: the dump
    sees only this namespace's sockets), or when the counters cannot be read, is left out."""
    inodes = {name: _socket_inodes(pid) for name, pid in pids.items() if _same_network(pid)}
    before = time.time()
    try:
        counters = _socket_counters()
    except (OSError, RuntimeError):
        return before, {}
    at = (before + time.time()) / 2  # the counters were read during the dump
    totals = {}
    for name, held in inodes.items():
        if held is None:
            continue
        found = [counters[i] for i in held if i in counters]
        totals[name] = (sum(c[0] for c in found), sum(c[1] for c in found))
    return at, totals
