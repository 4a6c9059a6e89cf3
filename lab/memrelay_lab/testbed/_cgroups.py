"""Per-host processor limits with cpu cgroups: a share of the processors and a cap.

A host's sshd starts inside the host's cgroup, and every process it starts (each SSH
session, so each memcached, memrelay and memrelay-bench of a run) inherits it. ``cpu_shares``
is the relative weight when hosts compete for the cores (cgroup v1 ``cpu.shares``, default
1024; v2 ``cpu.weight`` 1..10000, default 100, converted as systemd does); ``cpus`` caps the
host at that many cores' time (v1 ``cpu.cfs_quota_us`` over ``cpu.cfs_period_us``, v2
``cpu.max``). Without either, the cgroup still groups the host's processes, which `down`
uses to find them.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from ._names import Names, TestbedError

__all__ = ["cgroup_root", "enter_cgroup", "make_cgroup", "our_cgroups", "remove_cgroup"]

_V1 = Path("/sys/fs/cgroup/cpu")
_V2 = Path("/sys/fs/cgroup")
_PERIOD_US = 100_000


def cgroup_root() -> tuple[Path, int] | None:
    """The cpu controller's folder and the cgroup version; None without one."""
    if (_V1 / "cpu.shares").exists():
        return _V1, 1
    if (_V2 / "cgroup.controllers").exists() and "cpu" in (_V2 / "cgroup.controllers").read_text().split():
        return _V2, 2
    return None


def _root() -> tuple[Path, int]:
    found = cgroup_root()
    if found is None:
        raise TestbedError("no cpu cgroup controller (neither /sys/fs/cgroup/cpu nor a unified tree with cpu)")
    return found


def our_cgroups(names: Names) -> list[Path]:
    found = cgroup_root()
    if found is None:
        return []
    root, _ = found
    return sorted(p for p in root.iterdir() if p.is_dir() and names.ours(p.name))


def make_cgroup(names: Names, host: str, cpu_shares: int | None, cpus: float | None) -> Path:
    root, version = _root()
    path = root / names.cgroup(host)
    path.mkdir()
    try:
        if version == 1:
            if cpu_shares is not None:
                (path / "cpu.shares").write_text(str(cpu_shares))
            if cpus is not None:
                (path / "cpu.cfs_period_us").write_text(str(_PERIOD_US))
                (path / "cpu.cfs_quota_us").write_text(str(int(cpus * _PERIOD_US)))
        else:
            if "cpu" not in (root / "cgroup.subtree_control").read_text().split():
                (root / "cgroup.subtree_control").write_text("+cpu")
            if cpu_shares is not None:  # systemd's conversion of shares to weight
                (path / "cpu.weight").write_text(str(max(1, min(10000, cpu_shares * 100 // 1024))))
            if cpus is not None:
                (path / "cpu.max").write_text(f"{int(cpus * _PERIOD_US)} {_PERIOD_US}")
    except OSError as error:
        raise TestbedError(f"cgroup {path}: {error}") from None
    return path


def enter_cgroup(path: Path) -> None:
    """Move the calling process into the cgroup (in a child before exec: its children follow)."""
    (path / "cgroup.procs").write_text(str(os.getpid()))


def _members(path: Path) -> list[int]:
    try:
        return [int(p) for p in (path / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def remove_cgroup(path: Path, timeout: float = 10.0) -> None:
    """Kill what still runs in it, then remove it (a cgroup with members cannot be removed)."""
    deadline = time.monotonic() + timeout
    while True:
        members = _members(path)
        for pid in members:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as error:
            if time.monotonic() > deadline:
                raise TestbedError(f"cannot remove cgroup {path} (members {members}): {error}") from None
            time.sleep(0.05)
