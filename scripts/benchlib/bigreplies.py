"""Gets whose replies are large: values stored straight on a memcached, then asked for through a
target and read at full speed on one or many connections, every byte counted and the reply's
shape checked (a target that answers an error or cuts the reply short is told apart)."""

from __future__ import annotations

import selectors
import socket
import time
from dataclasses import dataclass, field

from .connections import connect, read_until


def store(port: int, key: str, size: int) -> None:
    """`set key` with a value of `size` bytes on the memcached on 127.0.0.1:port."""
    value = (b"0123456789abcdef" * (size // 16 + 1))[:size]
    with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
        s.sendall(f"set {key} 0 0 {size}\r\n".encode() + value + b"\r\n")
        reply = read_until(s, b"\r\n")
    if reply != b"STORED\r\n":
        raise RuntimeError(f"set {key} ({size:,} bytes) on {port}: {reply[:200]!r}")


def reply_length(key: str, size: int, times: int = 1) -> int:
    """Bytes of the text protocol's reply to a get naming `key` (of `size` bytes) `times` times."""
    return times * (len(f"VALUE {key} 0 {size}\r\n") + size + 2) + len(b"END\r\n")


@dataclass
class Reading:
    """One connection's reply as it arrives: bytes counted, its first and last bytes kept."""

    expected: int
    received: int = 0
    head: bytes = b""
    tail: bytes = b""
    done: bool = False

    def take(self, chunk: memoryview) -> None:
        if len(self.head) < 64:
            self.head += bytes(chunk[: 64 - len(self.head)])
        self.tail = (self.tail + bytes(chunk[-8:]))[-8:]
        self.received += len(chunk)
        if self.received >= self.expected or (self.head.startswith((b"SERVER_ERROR", b"CLIENT_ERROR", b"ERROR"))
                                              and self.tail.endswith(b"\r\n")):
            self.done = True

    @property
    def complete(self) -> bool:
        return self.received == self.expected and self.head.startswith(b"VALUE ") and self.tail.endswith(b"END\r\n")

    def problem(self) -> str | None:
        """None for a whole, well-formed reply; else what was wrong with it."""
        if self.complete:
            return None
        if not self.head.startswith(b"VALUE "):
            first_line = self.head.split(b"\r\n")[0].decode(errors="replace")[:80]
            return f"answered {first_line!r}"
        return f"reply of {self.received:,} bytes where {self.expected:,} were due"


@dataclass
class Outcome:
    readings: list[Reading] = field(default_factory=list)
    seconds: float = 0.0

    def problem(self) -> str | None:
        problems = sorted({p for r in self.readings if (p := r.problem())})
        return "; ".join(problems) if problems else None


def get_all(port: int, request: bytes, expected: int, connections: int = 1, timeout: float = 120.0) -> tuple[Outcome, list[socket.socket]]:
    """Sends `request` on `connections` new connections to the target on `port` at once and reads
    every reply at full speed (`expected` bytes each). Returns what arrived and the connections,
    still open (the caller closes them: idle connections after their reply are what some rows
    measure)."""
    held = [connect(port, i, timeout=timeout) for i in range(connections)]
    sel = selectors.DefaultSelector()
    outcome = Outcome()
    buffer = bytearray(4 << 20)
    view = memoryview(buffer)
    started = time.monotonic()
    try:
        for s in held:
            s.sendall(request)
            s.setblocking(False)
            reading = Reading(expected)
            outcome.readings.append(reading)
            sel.register(s, selectors.EVENT_READ, reading)
        pending = len(held)
        while pending:
            if time.monotonic() - started > timeout:
                raise TimeoutError(f"replies not whole after {timeout:g} s")
            for key, _ in sel.select(timeout=1.0):
                reading = key.data
                try:
                    n = key.fileobj.recv_into(buffer)
                except BlockingIOError:
                    continue
                if n:
                    reading.take(view[:n])
                if not n or reading.done:
                    sel.unregister(key.fileobj)
                    pending -= 1
        outcome.seconds = time.monotonic() - started
    except BaseException:
        for s in held:
            s.close()
        raise
    finally:
        sel.close()
    for s in held:
        s.setblocking(True)
    return outcome, held
