"""Where processes run: the small :class:`Host` interface and its one implementation, :class:`LocalHost`.

The experiment logic only ever asks a host to *start* a command (its output going to a log
file on that host), to *poll*/*wait* for it, to *stop* it, to *fetch* a file it wrote (or
*collect* a run's folder), and for a free TCP port and the address others reach it at. Files
are named by their place in the results folder; ``path()`` says where such a file is on the
host (on this machine: right there). :class:`~memrelay_lab.experiment._ssh.SSHHost` (a machine
reached over SSH) implements the same methods; nothing else changes.

LocalHost starts every process in a new session (its own process group, ``start_new_session``)
so that stopping it stops everything it forked, and so that a Ctrl-C in the terminal reaches
only the lab, which then stops its children in order. On Linux each child also gets
PR_SET_PDEATHSIG = SIGKILL, so even a lab killed with SIGKILL leaves nothing behind; and
SIGINT/SIGTERM are held while a child is being started, so none escapes the bookkeeping. Every
process started and not yet reaped is tracked, and :meth:`LocalHost.stop_all` ends them all.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import sys
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path

from ..plumbing.processes import free_port

__all__ = ["Host", "HostError", "LocalHost", "ProcessHandle"]


class HostError(RuntimeError):
    """A host cannot be used: the message names it (``host NAME (ADDRESS): reason``)."""


@dataclass
class ProcessHandle:
    """A process a host started: enough to poll it, stop it and find its log."""

    name: str
    argv: list[str]
    pid: int
    log_path: Path
    started_unix: float
    returncode: int | None = None
    stopped_by_us: bool = False
    _popen: subprocess.Popen | None = field(default=None, repr=False)

    def as_dict(self) -> dict:
        return {
            "name": self.name,
            "argv": self.argv,
            "pid": self.pid,
            "log": str(self.log_path),
            "started_unix": self.started_unix,
            "returncode": self.returncode,
            "stopped_by_lab": self.stopped_by_us,
        }


class Host(ABC):
    """A machine the lab can start processes on."""

    name: str
    #: The address other processes use to reach listeners on this host.
    address: str
    #: Processes run as root there (memcached then needs ``-u root``).
    user_is_root: bool = False

    def describe(self) -> str:
        """``host NAME (ADDRESS)``: how messages name it."""
        return f"host {self.name} ({self.address})"

    def path(self, lab_path: Path) -> Path:
        """Where the file the lab names ``lab_path`` (in the results folder) is on this host."""
        return Path(lab_path)

    def collect(self, lab_dir: Path) -> None:
        """Copy every file this host's processes wrote under ``lab_dir`` into the results folder."""

    def remove_files(self) -> None:
        """Delete what the experiment left in the host's own folder (nothing on this machine:
        the results folder is the host's folder)."""

    def close(self) -> None:
        """Let go of the host (connections); its processes must be stopped first."""

    @abstractmethod
    def start(self, name: str, argv: list[str], log_path: Path, env: dict[str, str] | None = None) -> ProcessHandle:
        """Start ``argv``; stdout and stderr go to ``log_path`` (a path on this host)."""

    @abstractmethod
    def poll(self, handle: ProcessHandle) -> int | None:
        """The exit status if the process ended, else None."""

    @abstractmethod
    def wait(self, handle: ProcessHandle, timeout: float) -> int | None:
        """Wait up to ``timeout`` seconds; the exit status, or None if still running."""

    @abstractmethod
    def stop(self, handle: ProcessHandle, grace: float = 5.0, sig: int = signal.SIGTERM) -> int | None:
        """Send ``sig`` to the process group, wait ``grace`` seconds, then SIGKILL it. Exit status."""

    def stop_many(self, handles: list[ProcessHandle], grace: float = 5.0) -> None:
        """Stop several processes; a host may do it in parallel (LocalHost does)."""
        for handle in handles:
            self.stop(handle, grace)

    @abstractmethod
    def fetch(self, remote_path: Path, local_path: Path) -> Path | None:
        """Copy the file ``path(remote_path)`` the processes wrote to ``local_path`` (None if missing)."""

    @abstractmethod
    def free_port(self) -> int:
        """A TCP port that is free on this host right now."""

    @abstractmethod
    def stop_all(self, grace: float = 2.0) -> list[ProcessHandle]:
        """Stop every process this host started that is still running; returns them."""


class LocalHost(Host):
    """This machine, processes on the loopback interface."""

    def __init__(self, address: str = "127.0.0.1", name: str = "local"):
        self.name = name
        self.address = address
        self.user_is_root = hasattr(os, "geteuid") and os.geteuid() == 0
        self._live: dict[int, ProcessHandle] = {}

    def start(self, name: str, argv: list[str], log_path: Path, env: dict[str, str] | None = None) -> ProcessHandle:
        log_path = Path(log_path)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        # A signal between fork and registration would leave a child nobody tracks: hold
        # SIGINT/SIGTERM until it is registered (they are delivered right after).
        previous_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        try:
            with open(log_path, "ab") as log:
                popen = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    env=None if env is None else {**os.environ, **env},
                    preexec_fn=lambda: _child_setup(previous_mask),
                )
            handle = ProcessHandle(name, list(argv), popen.pid, log_path, time.time(), _popen=popen)
            self._live[popen.pid] = handle
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous_mask)
        return handle

    def poll(self, handle: ProcessHandle) -> int | None:
        if handle.returncode is None and handle._popen is not None:
            handle.returncode = handle._popen.poll()
            if handle.returncode is not None:
                self._reaped(handle)
        return handle.returncode

    def wait(self, handle: ProcessHandle, timeout: float) -> int | None:
        if handle.returncode is None and handle._popen is not None:
            try:
                handle.returncode = handle._popen.wait(timeout=max(timeout, 0.0))
            except subprocess.TimeoutExpired:
                return None
            self._reaped(handle)
        return handle.returncode

    def stop(self, handle: ProcessHandle, grace: float = 5.0, sig: int = signal.SIGTERM) -> int | None:
        if self.poll(handle) is None:
            handle.stopped_by_us = True
            deadline = time.monotonic() + grace
            _signal_group(handle.pid, sig)
            self.wait(handle, grace)
            self._end_group(handle, deadline)
        return handle.returncode

    def _end_group(self, handle: ProcessHandle, deadline: float) -> None:
        """After the signal: the leader's exit does not mean its children's (a shell's
        background job gets the signal too, and may still be on its way out), so wait for the
        whole group until ``deadline``, then SIGKILL what is left."""
        if handle.returncode is not None and _wait_group_gone(handle.pid, deadline):
            return
        _signal_group(handle.pid, signal.SIGKILL)
        self.wait(handle, 5.0)
        _wait_group_gone(handle.pid, time.monotonic() + 5.0)

    def stop_many(self, handles: list[ProcessHandle], grace: float = 5.0) -> None:
        """SIGTERM every live group at once, wait ``grace`` in all, SIGKILL what is left."""
        live = [h for h in handles if self.poll(h) is None]
        for handle in live:
            handle.stopped_by_us = True
            _signal_group(handle.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for handle in live:
            self.wait(handle, deadline - time.monotonic())
        for handle in live:
            self.poll(handle)
            self._end_group(handle, deadline)

    def stop_all(self, grace: float = 2.0) -> list[ProcessHandle]:
        live = [h for h in list(self._live.values()) if self.poll(h) is None]
        self.stop_many(live, grace)
        return live

    def fetch(self, remote_path: Path, local_path: Path) -> Path | None:
        remote_path, local_path = Path(remote_path), Path(local_path)
        if not remote_path.exists():
            return None
        if remote_path.resolve() != local_path.resolve():
            local_path.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(remote_path, local_path)
        return local_path

    def free_port(self) -> int:
        return free_port(self.address)

    @property
    def live(self) -> list[ProcessHandle]:
        """Processes started and not yet seen to exit."""
        return [h for h in self._live.values() if self.poll(h) is None]

    def _reaped(self, handle: ProcessHandle) -> None:
        self._live.pop(handle.pid, None)


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)  # the child leads its own session, so its group id is its pid
    except (ProcessLookupError, PermissionError):
        pass


def _group_alive(pgid: int) -> bool:
    """Whether a process of group ``pgid`` is still running (zombies, dead but not yet reaped by
    whoever inherited them, do not count). /proc where there is one, else kill(0)."""
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(pgid, 0)
            return True
        except (ProcessLookupError, PermissionError):
            return False
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] != "Z":
            return True
    return False


def _wait_group_gone(pgid: int, deadline: float) -> bool:
    """Waits (bounded by ``deadline``) until no process of group ``pgid`` runs; whether none does."""
    while _group_alive(pgid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
    return True


_PR_SET_PDEATHSIG = 1
try:  # resolved here, not in the child: no dlopen between fork and exec
    _prctl = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None
except (OSError, AttributeError):
    _prctl = None


def _child_setup(mask: set) -> None:  # runs in the child between fork and exec
    # The lab holds SIGINT/SIGTERM while it starts a child; the child gets the lab's usual mask.
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
