"""Did a target do the row's job? Judged from the memcached servers' own counters.

Throughput means nothing if a proxy skipped work (wrote one copy instead of three, sent a
multi-get to one server): after every measurement the servers' `stats` (cmd_set, cmd_get) are
compared with what the bench says was answered. A set reaches `COPIES[layout]` servers, never
two copies on one server; get keys are counted once each (cmd_get counts keys); with several
servers serving reads, each takes a share.
"""

from __future__ import annotations

import socket

from .rows import COPIES, Row

# Slack for requests in flight at the start and end of a measurement (counters are read
# around the bench process, which waits for its outstanding replies).
TOLERANCE = 0.02
# With reads spread over three servers, each must see at least this share of the keys.
MIN_SHARE = 0.15


def stats(port: int) -> dict[str, str]:
    """Every `stats` line of the memcached (or memrelay) on 127.0.0.1:port, by name."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"stats\r\n")
        data = b""
        while not data.endswith(b"END\r\n"):
            chunk = s.recv(65536)
            if not chunk:
                raise RuntimeError(f"the server on {port} closed during stats")
            data += chunk
    return dict(line.split(" ")[1:3] for line in data.decode().splitlines() if line.startswith("STAT "))


def server_counters(port: int) -> dict[str, int]:
    """cmd_set and cmd_get of the memcached on 127.0.0.1:port."""
    counters = stats(port)
    return {"cmd_set": int(counters["cmd_set"]), "cmd_get": int(counters["cmd_get"])}


def deltas(before: list[dict[str, int]], after: list[dict[str, int]]) -> list[dict[str, int]]:
    return [{k: a[k] - b[k] for k in a} for b, a in zip(before, after)]


def problems(row: Row, sets: int, get_keys: int, per_server: list[dict[str, int]], direct: bool) -> list[str]:
    """What is wrong with the servers' counts for a measurement of `row` (empty when right).

    `sets`, `get_keys`: what the bench had answered; `per_server`: counter deltas of each server;
    `direct`: the bench talked to the first server itself (only it must have seen the work)."""
    found = []
    copies = 1 if direct else COPIES[row.layout]
    set_counts = [s["cmd_set"] for s in per_server]
    get_counts = [s["cmd_get"] for s in per_server]

    def near(seen: int, expected: int) -> bool:
        return abs(seen - expected) <= TOLERANCE * expected + 2

    if not near(sum(set_counts), sets * copies):
        found.append(f"servers stored {sum(set_counts):,} sets for {sets:,} answered x {copies} copies")
    if any(count > sets * (1 + TOLERANCE) + 2 for count in set_counts):
        found.append(f"a server got more sets ({max(set_counts):,}) than were answered ({sets:,}): two copies on one server")
    if not near(sum(get_counts), get_keys):
        found.append(f"servers saw {sum(get_counts):,} get keys for {get_keys:,} asked")
    if not direct and row.servers > 1 and row.layout != "all3" and get_keys:
        shares = [count / max(sum(get_counts), 1) for count in get_counts]
        if min(shares) < MIN_SHARE:
            found.append(f"reads not spread over the servers: shares {', '.join(f'{s:.0%}' for s in shares)}")
    return found

