"""Servers for the client matrix (tests/clients): real memcached servers and memrelay.

The process handling (free ports, bounded waits, everything killed when its fixture ends, also
on failure) is tests/python's, loaded from tests/python/conftest.py. Here: a `Cluster` of 3
memcached servers behind memrelay, one of which a test can SIGKILL and restart on the same port,
read directly (`get` on each server) to check that replicas converged; the client programs are
in clients.py. Results worth a table (the failure runs, `all` included) are collected in
`MATRIX` and printed at the end of the session.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
_spec = importlib.util.spec_from_file_location("tests_python_conftest", HERE.parent / "python" / "conftest.py")
base = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = base  # dataclasses look their module up there
_spec.loader.exec_module(base)

from clients import BINARY_CLIENTS, CLIENTS  # noqa: E402

HOST = base.HOST
processes_factory = base.processes_factory
processes = base.processes
MATRIX: list[dict] = []


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "proxy25: judges memrelay behaviour that issue 25's proxy side adds (write policies and "
        "repair, binary-protocol refusal, a 1.6.x version); `-m 'not proxy25'` leaves them out",
    )


def memrelay_help() -> str:
    return subprocess.run([str(base.memrelay_binary()), "--help"], capture_output=True, text=True, timeout=30).stdout


@dataclass
class Cluster:
    """3 memcached servers and memrelay in front of them (every key on every server)."""

    group: "base.Processes"
    servers: list
    relay: "base.Process"

    @property
    def spec(self) -> str:
        return f"{HOST}:{self.relay.port}"

    def kill_server(self, i: int) -> None:
        """SIGKILL, as a crash: no goodbye to memrelay's connections."""
        proc = self.servers[i].proc
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)

    def restart_server(self, i: int) -> None:
        """A fresh (empty) memcached on the killed server's port."""
        old = self.servers[i]
        binary = base.memcached_binary()
        root = ["-u", "root"] if os.geteuid() == 0 else []
        args = [binary, "-p", str(old.port), "-U", "0", "-l", HOST, "-t", "1", "-m", "64", *root]
        stderr_path = old.stderr_path.with_suffix(".restarted")
        with open(stderr_path, "wb") as stderr:
            proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr)
        restarted = base.Process(old.name, old.port, proc, stderr_path)
        self.group.started.append(restarted)
        self.servers[i] = restarted
        if not base.wait_listening(proc, old.port):
            raise AssertionError(f"memcached did not restart on port {old.port}: {restarted.stderr()}")


def start_cluster(group, extra: list[str] = ()) -> Cluster:
    servers = [group.memcached() for _ in range(3)]
    relay = group.memrelay("evented", servers, list(extra))
    return Cluster(group, servers, relay)


def get_direct(port: int, keys: list[str]) -> dict[str, str]:
    """The values memcached on `port` holds for `keys` (absent keys left out), by plain gets."""
    found: dict[str, str] = {}
    with socket.create_connection((HOST, port), timeout=5) as s:
        for start in range(0, len(keys), 50):
            chunk = keys[start:start + 50]
            s.sendall(b"get " + " ".join(chunk).encode() + b"\r\n")
            buf = b""
            while not buf.endswith(b"END\r\n"):
                data = s.recv(1 << 20)
                if not data:
                    raise AssertionError(f"memcached on {port} closed the connection")
                buf += data
            pos = 0
            while True:
                eol = buf.index(b"\r\n", pos)
                line = buf[pos:eol].split()
                if line[0] == b"END":
                    break
                n = int(line[3])
                found[line[1].decode()] = buf[eol + 2:eol + 2 + n].decode()
                pos = eol + 2 + n + 2
    return found


def stat(port: int, name: str) -> int:
    with socket.create_connection((HOST, port), timeout=5) as s:
        s.sendall(b"stats\r\n")
        buf = b""
        while not buf.endswith(b"END\r\n"):
            data = s.recv(65536)
            if not data:
                break
            buf += data
    for line in buf.decode().splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] == name:
            return int(parts[2])
    raise AssertionError(f"memcached on {port} has no stat {name}")


@pytest.fixture(scope="module")
def relay(processes_factory):
    """memrelay in front of three memcached servers, shared by a test module."""
    group = processes_factory()
    try:
        yield start_cluster(group)
    finally:
        group.close()


def pytest_terminal_summary(terminalreporter):
    if not MATRIX:
        return
    tr = terminalreporter
    tr.section("client matrix: one of three servers SIGKILLed and restarted (speeds recorded, not judged)")
    tr.write_line(f"{'client':<16}{'policy':<9}{'healthy ops/s':>14}{'outage ops/s':>14}{'ratio':>7}"
                  f"{'ok in outage':>14}{'errors in outage':>18}{'connections':>12}{'stale reads':>12}"
                  f"{'repair keys':>12}  converged")
    for r in MATRIX:
        tr.write_line(
            f"{r['client']:<16}{r['policy']:<9}{r['healthy']:>14,.0f}{r['outage']:>14,.0f}{r['ratio']:>7.0%}"
            f"{r['outage_ok']:>14,}{r['outage_errors']:>18,}{r['connections']:>12,}"
            f"{r['stale_reads']:>12,}{r['repair_keys']:>12,}  {r['converged']}"
        )
    out = os.environ.get("MEMRELAY_CLIENT_MATRIX_JSON")
    if out:
        import json

        Path(out).write_text(json.dumps(MATRIX, indent=1))
