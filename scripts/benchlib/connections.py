"""Many client connections to one target on this machine: the descriptor limit raised for this
process (and so for every process it starts), source addresses spread over 127.0.0.x so that
ephemeral ports never run short, and a request answered on each connection before it idles."""

from __future__ import annotations

import resource
import socket
import struct

# Connections per source address: well below the 28,232 ephemeral ports of Linux's default range, since
# connect() searches the range for a free port and the search slows as the range fills.
PER_SOURCE = 4_000
IP_BIND_ADDRESS_NO_PORT = getattr(socket, "IP_BIND_ADDRESS_NO_PORT", 24)


def raise_descriptor_limit(wanted: int) -> int:
    """Raises RLIMIT_NOFILE to `wanted` descriptors (the hard limit too where this process may,
    as root may up to fs.nr_open); processes started afterwards inherit it. Returns the soft limit
    now in force, which is below `wanted` where the hard limit could not be raised."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= wanted:
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, max(hard, wanted)))
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(wanted, hard), hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def source_address(index: int) -> str:
    """The loopback address the `index`-th connection comes from: 127.0.0.1, then .2, ... every
    PER_SOURCE connections."""
    return f"127.0.0.{1 + index // PER_SOURCE}"


def connect(port: int, index: int, timeout: float = 10.0) -> socket.socket:
    """A connection to 127.0.0.1:port from source_address(index). Its port is picked at connect()
    (IP_BIND_ADDRESS_NO_PORT), so each source address has the whole ephemeral range per target;
    it closes with a reset (SO_LINGER 0), leaving no TIME_WAIT behind."""
    s = socket.socket()
    try:
        s.setsockopt(socket.IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.settimeout(timeout)
        s.bind((source_address(index), 0))
        s.connect(("127.0.0.1", port))
    except OSError:
        s.close()
        raise
    return s


ERRORS = (b"SERVER_ERROR", b"CLIENT_ERROR", b"ERROR")


def read_until(s: socket.socket, end: bytes) -> bytes:
    """The reply up to `end`, or up to the end of its first line where that is an error."""
    data = b""
    while not data.endswith(end) and not (data.startswith(ERRORS) and data.endswith(b"\r\n")):
        chunk = s.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed before {end!r}; got {data[-200:]!r}")
        data += chunk
    return data


def open_idle(port: int, count: int, request: bytes, end: bytes = b"END\r\n", batch: int = 200) -> list[socket.socket]:
    """`count` connections to the target on `port`, each having sent `request` and read its reply
    (up to `end`); batches of `batch` so that the target's accept queue never overflows. Returns
    the connections, open and idle; on any failure closes them and raises."""
    held: list[socket.socket] = []
    try:
        while len(held) < count:
            fresh = [connect(port, len(held) + i) for i in range(min(batch, count - len(held)))]
            held.extend(fresh)
            for s in fresh:
                s.sendall(request)
            for s in fresh:
                reply = read_until(s, end)
                if reply.startswith(ERRORS):
                    raise ConnectionError(f"connection {len(held)}: {reply[:200]!r}")
    except BaseException:
        close_all(held)
        raise
    return held


def close_all(held: list[socket.socket]) -> None:
    for s in held:
        s.close()
    held.clear()
