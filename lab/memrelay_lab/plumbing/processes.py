"""Processes started on this machine and their ports: a free port, waiting until a process
listens, a group of processes stopped together, and a process's CPU time.

`make bench` starts its processes with :class:`Processes`; the lab starts them through a
host (`experiment._hosts`) and waits for them with :func:`wait_for_port` as well.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["NotListening", "Processes", "cpu_split", "free_port", "wait_for_port"]

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _port_range(spec: str | None) -> tuple[int, int]:
    """Where free_port picks: below the kernel's ephemeral range (32768 and up here), or
    $MEMRELAY_PORTS ("FROM-TO", both included), which `make test` sets apart for suites that run
    side by side."""
    if not spec:
        return 20000, 32768
    low, _, high = spec.partition("-")
    try:
        start, end = int(low), int(high) + 1
    except ValueError:
        raise ValueError(f"MEMRELAY_PORTS={spec!r}: expected FROM-TO, e.g. 20000-26383") from None
    if not 1024 <= start < end <= 65536:
        raise ValueError(f"MEMRELAY_PORTS={spec!r}: expected 1024 <= FROM <= TO <= 65535")
    return start, end


PORTS_FROM, PORTS_TO = _port_range(os.environ.get("MEMRELAY_PORTS"))


def free_port(address: str = "127.0.0.1") -> int:
    """A TCP port free on ``address`` right now."""
    # Below the ephemeral range: a port the kernel hands out as free can be taken by a client's
    # outgoing connection before the server binds it (a run's memcached once exited "Address
    # already in use" in a fresh clone's tests).
    for _ in range(200):
        port = random.randrange(PORTS_FROM, PORTS_TO)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind((address, port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((address, 0))
        return probe.getsockname()[1]


class NotListening(RuntimeError):
    """A process did not come to listen: ``status`` is its exit status when it exited, None when
    the time ran out; ``taken`` when it exited just after someone answered on its port."""

    def __init__(self, message: str, status: int | None = None, taken: bool = False):
        super().__init__(message)
        self.status = status
        self.taken = taken


def wait_for_port(port: int, exited: subprocess.Popen | Callable[[], int | None] | None = None,
                  timeout: float = 5.0, address: str = "127.0.0.1") -> None:
    """Return once something accepts TCP connections on ``address:port``. ``exited``: the process
    (or a function giving its exit status, None while it runs) that should listen there; it
    exiting first is a NotListening at once, as is the time running out."""
    if isinstance(exited, subprocess.Popen):
        name, exited = exited.args[0], exited.poll
    else:
        name = "the process"
    deadline = time.monotonic() + timeout
    while True:
        status = exited() if exited else None
        if status is not None:
            raise NotListening(f"{name} exited with status {status} before listening on {port}", status)
        try:
            with socket.create_connection((address, port), timeout=0.5):
                pass
        except OSError:
            if time.monotonic() > deadline:
                raise NotListening(f"nothing listens on {address}:{port} after {timeout:g} s") from None
            time.sleep(0.02)
            continue
        # Someone listens; make sure it is ours (a taken port makes ours exit at once).
        time.sleep(0.05)
        status = exited() if exited else None
        if status is not None:
            raise NotListening(f"{name} exited with status {status} (port {port} taken?)", status, taken=True)
        return


def cpu_split(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of a process and its threads, from /proc (fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) / CLOCK_TICKS, int(fields[12]) / CLOCK_TICKS


@dataclass
class Processes:
    """Every process started here, stopped together."""

    started: list[subprocess.Popen] = field(default_factory=list)

    def start(self, argv: list[str], log: Path) -> subprocess.Popen:
        with open(log, "wb") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self.started.append(proc)
        return proc

    def stop(self, proc: subprocess.Popen) -> None:
        """Stops one of them (SIGTERM, then SIGKILL after 5 s)."""
        self._stop([proc])
        self.started.remove(proc)

    def stop_all(self) -> None:
        self._stop(self.started)

    @staticmethod
    def _stop(procs: list[subprocess.Popen]) -> None:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
