"""Real memcached servers and a real memrelay in front of them, for tests/python.

Builds nothing: memrelay is taken from $MEMRELAY_BIN_DIR (default: target/release of this
repository); `make test-clients` sets it. memcached is /usr/bin/memcached (or the one on PATH),
installed by `make deps`.

The `target` fixture is what a test talks to, one of:
- `memcached`: one memcached, directly (the reference: every test must pass there);
- `<engine>-<mode>`: memrelay with engine `pool` or `evented` in front of 3 fresh memcached
  servers, mode `all` (every key on every server, the default), `sharded` (multi-gets split over
  the servers) or `ketama-r2` (a consistent-hash ring, two copies of each key).

Every process started here is killed when its fixture ends, also when a test fails; ports are
waited for with a bounded loop, and a lost race for a free port is retried on another one.
"""

from __future__ import annotations

import itertools
import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ENGINES = ("pool", "evented")
MODES = {
    "all": [],
    "sharded": ["--sharded"],
    "ketama-r2": ["--distribution", "ketama", "--replication", "2"],
}
TARGETS = ["memcached"] + [f"{engine}-{mode}" for engine in ENGINES for mode in MODES]
HOST = "127.0.0.1"
START_ATTEMPTS = 5
PORT_WAIT_S = 10.0


def memrelay_binary() -> Path:
    bin_dir = Path(os.environ.get("MEMRELAY_BIN_DIR", REPO / "target" / "release"))
    binary = bin_dir / "memrelay"
    if not os.access(binary, os.X_OK):
        pytest.fail(
            f"{binary} not found: build it with `cargo build --release -p memrelay` "
            "or set MEMRELAY_BIN_DIR",
            pytrace=False,
        )
    return binary


def memcached_binary() -> str:
    found = shutil.which("memcached") or "/usr/bin/memcached"
    if not os.access(found, os.X_OK):
        pytest.fail("memcached not found (run `make deps`)", pytrace=False)
    return found


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL is not ignored
        pass


def wait_listening(proc: subprocess.Popen, port: int) -> bool:
    """True once `port` accepts connections; False if the process exited first."""
    deadline = time.monotonic() + PORT_WAIT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            socket.create_connection((HOST, port), timeout=0.5).close()
            return True
        except OSError:
            time.sleep(0.005)
    kill(proc)
    raise AssertionError(f"{proc.args[0]} did not listen on port {port} within {PORT_WAIT_S} s")


@dataclass
class Process:
    """A started server: its port and what it wrote on stderr."""

    name: str
    port: int
    proc: subprocess.Popen
    stderr_path: Path

    @property
    def addr(self) -> tuple[str, int]:
        return (HOST, self.port)

    def stderr(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")
        except OSError:
            return ""


@dataclass
class Processes:
    """Starts servers and kills every one of them on close()."""

    workdir: Path
    started: list[Process] = field(default_factory=list)

    def start(self, name: str, args_for_port) -> Process:
        for attempt in range(START_ATTEMPTS):
            port = free_port()
            stderr_path = self.workdir / f"{name}-{port}-{attempt}.stderr"
            with open(stderr_path, "wb") as stderr:
                proc = subprocess.Popen(
                    args_for_port(port),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=stderr,
                )
            started = Process(name, port, proc, stderr_path)
            self.started.append(started)
            if wait_listening(proc, port):
                return started
            # Exited at start: most likely lost the port to someone else; try another one.
            text = started.stderr()
            if "in use" not in text and "cannot listen" not in text:
                raise AssertionError(f"{name} exited at start ({proc.returncode}): {text}")
        raise AssertionError(f"{name} did not start after {START_ATTEMPTS} attempts")

    def memcached(self) -> Process:
        binary = memcached_binary()
        root = ["-u", "root"] if os.geteuid() == 0 else []
        return self.start(
            "memcached",
            lambda port: [binary, "-p", str(port), "-U", "0", "-l", HOST, "-t", "1", "-m", "64", *root],
        )

    def memrelay(self, engine: str, servers: list[Process], extra: list[str]) -> Process:
        binary = str(memrelay_binary())
        server_args = [a for s in servers for a in ("--server", f"{HOST}:{s.port}")]
        return self.start(
            f"memrelay-{engine}",
            lambda port: [
                binary, "--engine", engine, "--listen", f"{HOST}:{port}", *server_args, *extra,
            ],
        )

    def close(self) -> None:
        for started in reversed(self.started):
            kill(started.proc)
        self.started.clear()


@pytest.fixture(scope="session")
def processes_factory():
    """Makes `Processes` groups; whatever a group left running is killed at the end."""
    groups: list[Processes] = []
    with tempfile.TemporaryDirectory(prefix="memrelay-clients-") as workdir:

        def make() -> Processes:
            group = Processes(Path(workdir))
            groups.append(group)
            return group

        try:
            yield make
        finally:
            for group in groups:
                group.close()


@pytest.fixture
def processes(processes_factory):
    """A group of servers for one test, killed when the test ends."""
    group = processes_factory()
    try:
        yield group
    finally:
        group.close()


@dataclass
class Target:
    """Where a test sends its requests, and the memcached servers that hold the data."""

    name: str
    port: int
    servers: list[Process]
    relay: Process | None

    @property
    def addr(self) -> tuple[str, int]:
        return (HOST, self.port)

    @property
    def spec(self) -> str:
        return f"{HOST}:{self.port}"

    def diagnostics(self) -> str:
        return self.relay.stderr() if self.relay else ""


def start_target(group: Processes, name: str) -> Target:
    if name == "memcached":
        server = group.memcached()
        return Target(name, server.port, [server], None)
    engine, mode = name.split("-", 1)
    servers = [group.memcached() for _ in range(3)]
    relay = group.memrelay(engine, servers, MODES[mode])
    return Target(name, relay.port, servers, relay)


@pytest.fixture(scope="session", params=TARGETS)
def target(request, processes_factory):
    """One memcached directly, or memrelay (engine x mode) in front of 3 fresh memcached."""
    group = processes_factory()
    try:
        yield start_target(group, request.param)
    finally:
        group.close()


_test_numbers = itertools.count()


@pytest.fixture
def prefix(request) -> str:
    """A key prefix of this test's own, so tests sharing a target's servers do not meet."""
    return f"t{next(_test_numbers)}:{request.node.originalname.removeprefix('test_')[:40]}:"
