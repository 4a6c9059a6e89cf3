"""A machine reached over SSH: :class:`SSHHost`, the second implementation of :class:`Host`.

Built on asyncssh (docs/ARCHITECTURE.md says why). asyncssh is asyncio and the lab is
synchronous, so one event loop runs in a daemon thread (`_Loop`) and every call submits a
coroutine to it and waits for the result. Each host keeps one connection for its short
commands, its SFTP session and its clock readings, and one more per
`PROCESSES_PER_CONNECTION` processes (sshd's MaxSessions caps the channels of a connection,
10 by default); connections are reused for the whole experiment.

Paths. The lab names every file by its place in the results folder (a *lab path*). On a
remote machine the same file lives under the host's own folder: ``path(lab_path)`` is
``<work_dir>/<results folder name>-<start stamp>/<path inside the results folder>``. The run
passes mapped paths in the command lines it builds; the logs of processes that ended and
every file of a run are copied back into the results folder (`fetch`, `collect`), so the
results folder looks the same whichever host ran what.

A process is started on its own channel as::

    cd WORK && exec setsid -w sh -c 'echo $$; <watcher> & exec "$@" >>LOG 2>&1' sh LOG ARGV...

``setsid`` puts it in a new session, so its pid is its process group: `stop` signals the
group (``kill -15 -PGID``, then ``kill -9`` after the grace). ``setsid -w`` stays until it
ends, so the channel's exit status is the process's. The watcher, a subshell in the same
group, reads the channel's stdin: when the channel goes away (the lab was killed, its
connection dropped), the read ends and it kills the group, so nothing outlives the lab.
"""

from __future__ import annotations

import asyncio
import os
import posixpath
import random
import shlex
import signal
import threading
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

import asyncssh

from ._hosts import Host, HostError, ProcessHandle
from ._topology import HostSpec

__all__ = ["HostError", "SSHHost", "CONNECT_TIMEOUT_S"]

CONNECT_TIMEOUT_S = 10.0
# Processes per SSH connection: below sshd's default MaxSessions (10).
PROCESSES_PER_CONNECTION = 8
COMMAND_TIMEOUT_S = 60.0
# free_port picks from here: below the usual ephemeral range (32768-60999), so an outgoing
# connection of the host never takes the port between the pick and the listen.
_PORT_RANGE = (20000, 32000)

T = TypeVar("T")


class _Loop:
    """One asyncio event loop in a daemon thread, shared by every SSH host of the lab."""

    _instance: _Loop | None = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="memrelay-lab-ssh", daemon=True)
        self.thread.start()

    @classmethod
    def get(cls) -> _Loop:
        with cls._lock:
            if cls._instance is None:
                cls._instance = _Loop()
            return cls._instance

    def run(self, awaitable: Awaitable[T], timeout: float | None = None) -> T:
        """Run ``awaitable`` on the loop and wait for its result (from any thread but the loop's)."""
        async def wrapped() -> T:
            return await awaitable

        return asyncio.run_coroutine_threadsafe(wrapped(), self.loop).result(timeout)


@dataclass
class _Remote:
    """What SSHHost keeps per process besides its handle."""

    process: asyncssh.SSHClientProcess
    closed: asyncio.Future
    connection: list  # its entry of SSHHost._process_connections
    signalled: int | None = None


_START = (
    'echo $$; exec 3<&0; '
    # The watcher: EOF on the channel's stdin means the lab is gone; kill the whole group.
    '(read _ <&3; kill -9 -$$) >/dev/null 2>&1 & '
    'LOG=$1; shift; exec "$@" 3<&- </dev/null >>"$LOG" 2>&1'
)


class SSHHost(Host):
    """A machine of ``[hosts]``, reached over SSH; processes run there, files come back by SFTP."""

    def __init__(self, spec: HostSpec, lab_root: Path | None = None, run_name: str | None = None):
        self.spec = spec
        self.name = spec.name
        self.address = spec.address
        self.lab_root = Path(lab_root).resolve() if lab_root is not None else None
        stamp = time.strftime("%Y%m%d-%H%M%S")
        folder = f"{run_name or (self.lab_root.name if self.lab_root else 'lab')}-{stamp}-{os.getpid()}"
        self.remote_root = PurePosixPath(spec.work_dir) / folder
        self._loop = _Loop.get()
        self._connection: asyncssh.SSHClientConnection | None = None  # commands, SFTP, the clock
        self._sftp: asyncssh.SFTPClient | None = None
        # The processes' connections, each with its count of processes (sshd's MaxSessions).
        self._process_connections: list[list] = []
        self._remotes: dict[int, _Remote] = {}
        self._live: dict[int, ProcessHandle] = {}
        self._ports_given: set[int] = set()
        self.user_is_root = spec.user == "root"

    # ------------------------------------------------------------ connection

    def describe(self) -> str:
        return self.spec.describe()

    def connect(self, timeout: float = CONNECT_TIMEOUT_S) -> None:
        """Reach and log in to the host; HostError with the reason (unreachable, key refused, ...)."""
        if self._connection is None:
            self._connection = self._open(timeout)

    def _open(self, timeout: float = CONNECT_TIMEOUT_S) -> asyncssh.SSHClientConnection:
        spec = self.spec
        if spec.key is not None and not Path(spec.key).is_file():
            raise HostError(f"{spec.describe()}: the key file {spec.key} does not exist")
        if spec.known_hosts is not None and not Path(spec.known_hosts).is_file():
            raise HostError(f"{spec.describe()}: the known_hosts file {spec.known_hosts} does not exist")
        options: dict[str, Any] = {"port": spec.port, "connect_timeout": timeout}
        if spec.user:
            options["username"] = spec.user
        if spec.key is not None:
            options["client_keys"] = [spec.key]
            options["agent_path"] = None  # the key named is the key tried
        if spec.known_hosts is not None:
            options["known_hosts"] = spec.known_hosts
        user = spec.user or os.environ.get("USER") or "the lab's user"
        try:
            return self._loop.run(asyncssh.connect(spec.address, **options), timeout + 5)
        except asyncssh.PermissionDenied:
            key = f"with key {spec.key}" if spec.key else "with the agent's and ~/.ssh's keys"
            raise HostError(f"{spec.describe()}: authentication failed for user {user} {key}") from None
        except asyncssh.HostKeyNotVerifiable as error:
            where = spec.known_hosts or "~/.ssh/known_hosts"
            raise HostError(f"{spec.describe()}: its host key is not trusted by {where} ({error.reason})") from None
        except (asyncio.TimeoutError, TimeoutError):
            raise HostError(f"{spec.describe()}: no answer within {timeout:g} s") from None
        except asyncssh.KeyImportError as error:
            raise HostError(f"{spec.describe()}: cannot read the key {spec.key}: {error}") from None
        except (OSError, asyncssh.Error) as error:
            reason = getattr(error, "strerror", None) or getattr(error, "reason", None) or str(error)
            raise HostError(f"{spec.describe()}: cannot connect: {reason}") from None

    @property
    def connection(self) -> asyncssh.SSHClientConnection:
        if self._connection is None:
            self.connect()
        assert self._connection is not None
        return self._connection

    def _process_connection(self) -> list:
        """A connection with room for one more process: sshd allows MaxSessions channels per
        connection (10 by default), so every `PROCESSES_PER_CONNECTION` processes get a new one."""
        for entry in self._process_connections:
            if entry[1] < PROCESSES_PER_CONNECTION:
                return entry
        entry = [self._open(), 0]
        self._process_connections.append(entry)
        return entry

    def close(self) -> None:
        """Close the connections (processes still running get killed by their watchers)."""
        connections = [entry[0] for entry in self._process_connections]
        if self._connection is not None:
            connections.append(self._connection)
        self._connection, self._sftp, self._process_connections = None, None, []
        for connection in connections:
            connection.close()
            try:
                self._loop.run(connection.wait_closed(), 10)
            except Exception:  # noqa: BLE001 - closing is best effort
                pass

    def remove_files(self) -> None:
        """Delete this experiment's folder on the host (its files were fetched run by run)."""
        if (self._connection is not None or self._process_connections) and len(self.remote_root.parts) >= 3:
            self.run(f"rm -rf -- {shlex.quote(str(self.remote_root))}")

    def run(self, command: str, timeout: float = COMMAND_TIMEOUT_S) -> asyncssh.SSHCompletedProcess:
        """Run a short shell command to its end; its exit status, stdout and stderr."""
        try:
            return self._loop.run(self.connection.run(command, check=False, timeout=timeout), timeout + 5)
        except (asyncssh.Error, OSError, asyncio.TimeoutError, TimeoutError) as error:
            raise HostError(f"{self.describe()}: {command.split()[0]}: {type(error).__name__}: {error}") from None

    def clock_samples(self, count: int) -> list[tuple[float, float, float]]:
        """``count`` readings (t0, host's time, t1) of the host's clock between two of the lab's.

        One shell on the host answers each line with ``date +%s.%N``, and the lab's clock is
        read on the event loop's thread right before the line goes and right after the answer
        comes: a round trip is one exchange on an open channel, not a session's start.
        """
        connection = self.connection

        async def sample() -> list[tuple[float, float, float]]:
            process = await connection.create_process("while read _; do date +%s.%N; done", encoding="utf-8")
            try:
                readings = []
                for _ in range(count):
                    t0 = time.time()
                    process.stdin.write("\n")
                    line = await asyncio.wait_for(process.stdout.readline(), COMMAND_TIMEOUT_S)
                    t1 = time.time()
                    readings.append((t0, float(line), t1))
                return readings
            finally:
                process.stdin.write_eof()
                process.close()

        try:
            return self._loop.run(sample(), COMMAND_TIMEOUT_S + 10)
        except (asyncssh.Error, OSError, ValueError, asyncio.TimeoutError, TimeoutError) as error:
            raise HostError(f"{self.describe()}: cannot read its clock: {type(error).__name__}: {error}") from None

    def _sftp_client(self) -> asyncssh.SFTPClient:
        if self._sftp is None:
            self._sftp = self._loop.run(self.connection.start_sftp_client(), COMMAND_TIMEOUT_S)
        return self._sftp

    # ------------------------------------------------------------ paths

    def path(self, lab_path: Path) -> Path:
        lab_path = Path(lab_path).resolve()
        if self.lab_root is None:
            raise HostError(f"{self.describe()}: no results folder given, cannot place {lab_path}")
        try:
            inside = lab_path.relative_to(self.lab_root)
        except ValueError:
            raise HostError(f"{self.describe()}: {lab_path} is outside the results folder {self.lab_root}") from None
        return Path(self.remote_root / PurePosixPath(*inside.parts))

    # ------------------------------------------------------------ processes

    def start(self, name: str, argv: list[str], log_path: Path, env: dict[str, str] | None = None) -> ProcessHandle:
        remote_log = self.path(log_path)
        prefix = ["env", *(f"{k}={v}" for k, v in env.items())] if env else []
        command = (f"mkdir -p {shlex.quote(str(remote_log.parent))} && cd {shlex.quote(str(self.remote_root))} && "
                   f"exec {shlex.join([*prefix, 'setsid', '-w', 'sh', '-c', _START, 'sh', str(remote_log), *argv])}")

        entry = self._process_connection()
        connection = entry[0]

        async def launch() -> tuple[asyncssh.SSHClientProcess, int, asyncio.Future]:
            process = await connection.create_process(command, encoding="utf-8")
            closed = asyncio.ensure_future(process.channel.wait_closed())
            try:
                line = await asyncio.wait_for(process.stdout.readline(), COMMAND_TIMEOUT_S)
            except asyncio.TimeoutError:
                line = ""
            if not line.strip().isdigit():
                await asyncio.wait({closed}, timeout=5)
                error = await asyncio.wait_for(process.stderr.read(2000), 1) if closed.done() else ""
                process.close()
                raise HostError(f"{self.describe()}: {name} did not start (exit status {process.exit_status}): "
                                f"{(error or line).strip()[:300]}")
            return process, int(line), closed

        try:
            process, pid, closed = self._loop.run(launch(), COMMAND_TIMEOUT_S + 10)
        except (asyncssh.Error, OSError) as error:
            raise HostError(f"{self.describe()}: cannot start {name}: {error}") from None
        handle = ProcessHandle(name, list(argv), pid, Path(log_path), time.time())
        entry[1] += 1
        self._remotes[pid] = _Remote(process, closed, entry)
        self._live[pid] = handle
        return handle

    def poll(self, handle: ProcessHandle) -> int | None:
        remote = self._remotes.get(handle.pid)
        if handle.returncode is None and remote is not None and remote.closed.done():
            self._ended(handle, remote)
        return handle.returncode

    def wait(self, handle: ProcessHandle, timeout: float) -> int | None:
        remote = self._remotes.get(handle.pid)
        if handle.returncode is None and remote is not None and not remote.closed.done():
            async def closed() -> None:
                await asyncio.wait({remote.closed}, timeout=max(timeout, 0.0))

            self._loop.run(closed(), max(timeout, 0.0) + 10)
        return self.poll(handle)

    def _ended(self, handle: ProcessHandle, remote: _Remote) -> None:
        status = remote.process.returncode
        if status is None:
            status = -1  # the channel went away without a status (the connection dropped)
        elif remote.signalled is not None and status in (remote.signalled, remote.signalled | 0x80):
            status = -remote.signalled  # `setsid -w` exits with the signal number of a signalled child
        handle.returncode = status
        self._live.pop(handle.pid, None)
        remote.connection[1] -= 1
        try:
            self.fetch(handle.log_path, handle.log_path)  # the log beside the other results
        except HostError:
            pass

    def _signal(self, handle: ProcessHandle, sig: int) -> None:
        remote = self._remotes.get(handle.pid)
        if remote is not None:
            remote.signalled = int(sig)
        self.run(f"kill -{int(sig)} -{handle.pid} 2>/dev/null", timeout=COMMAND_TIMEOUT_S)

    def stop(self, handle: ProcessHandle, grace: float = 5.0, sig: int = signal.SIGTERM) -> int | None:
        if self.poll(handle) is None:
            handle.stopped_by_us = True
            self._signal(handle, sig)
            if self.wait(handle, grace) is None:
                self._signal(handle, signal.SIGKILL)
                self.wait(handle, 5.0)
        return handle.returncode

    def stop_many(self, handles: list[ProcessHandle], grace: float = 5.0) -> None:
        """SIGTERM every live group in one command, wait ``grace`` in all, SIGKILL what is left."""
        live = [h for h in handles if self._remotes.get(h.pid) is not None and self.poll(h) is None]
        if not live:
            return
        for sig, wait_s in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
            for handle in live:
                handle.stopped_by_us = True
                self._remotes[handle.pid].signalled = int(sig)
            groups = " ".join(f"-{h.pid}" for h in live)
            self.run(f"kill -{int(sig)} {groups} 2>/dev/null", timeout=COMMAND_TIMEOUT_S)
            deadline = time.monotonic() + wait_s
            for handle in live:
                self.wait(handle, deadline - time.monotonic())
            live = [h for h in live if self.poll(h) is None]
            if not live:
                return

    def stop_all(self, grace: float = 2.0) -> list[ProcessHandle]:
        live = [h for h in list(self._live.values()) if self.poll(h) is None]
        if not live:
            return []
        try:
            self.stop_many(live, grace)
        except HostError:
            pass  # the connection is gone: the watchers kill what was left
        return live

    # ------------------------------------------------------------ files and ports

    def fetch(self, remote_path: Path, local_path: Path) -> Path | None:
        source = str(self.path(remote_path))
        local_path = Path(local_path)
        local_path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._loop.run(self._sftp_client().get(source, str(local_path)), COMMAND_TIMEOUT_S)
        except asyncssh.SFTPNoSuchFile:
            return None
        except (asyncssh.Error, OSError) as error:
            raise HostError(f"{self.describe()}: cannot fetch {source}: {error}") from None
        return local_path

    def collect(self, lab_dir: Path) -> None:
        """Copy back every file this host's processes wrote under ``lab_dir``."""
        source = str(self.path(lab_dir))
        lab_dir = Path(lab_dir)
        lab_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._loop.run(self._sftp_client().get(source, str(lab_dir.parent), recurse=True), 300)
        except asyncssh.SFTPNoSuchFile:
            return
        except (asyncssh.Error, OSError) as error:
            raise HostError(f"{self.describe()}: cannot fetch {source}: {error}") from None

    def put(self, local_path: Path, remote_path: str, mode: int = 0o755) -> None:
        """Copy a file of this machine to the host (used to ship binaries)."""
        sftp = self._sftp_client()

        async def upload() -> None:
            await sftp.makedirs(posixpath.dirname(remote_path), exist_ok=True)
            await sftp.put(str(local_path), remote_path)
            await sftp.chmod(remote_path, mode)

        try:
            self._loop.run(upload(), 600)
        except (asyncssh.Error, OSError) as error:
            raise HostError(f"{self.describe()}: cannot copy {local_path} to {remote_path}: {error}") from None

    def free_port(self) -> int:
        """A port nobody on the host uses (its /proc/net/tcp*), not handed out before by this host."""
        done = self.run("cat /proc/net/tcp /proc/net/tcp6 2>/dev/null")
        used = set()
        for line in (done.stdout or "").splitlines()[1:]:
            fields = line.split()
            if len(fields) > 2 and ":" in fields[1]:
                try:
                    used.add(int(fields[1].rsplit(":", 1)[1], 16))
                except ValueError:
                    continue
        candidates = [p for p in range(*_PORT_RANGE) if p not in used and p not in self._ports_given]
        if not candidates:
            raise HostError(f"{self.describe()}: no free port in {_PORT_RANGE[0]}..{_PORT_RANGE[1]}")
        port = random.choice(candidates)
        self._ports_given.add(port)
        return port

    @property
    def live(self) -> list[ProcessHandle]:
        return [h for h in self._live.values() if self.poll(h) is None]
