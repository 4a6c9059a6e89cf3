"""A process's resident memory, from /proc/PID/status: now (VmRSS), its high-water mark (VmHWM),
and the peak while something runs (VmRSS sampled every few milliseconds, and VmHWM where it grew)."""

from __future__ import annotations

import threading
import time
from pathlib import Path


def status_bytes(pid: int, field: str) -> int:
    """A `kB` field of /proc/PID/status (VmRSS, VmHWM, ...) in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(f"no {field} in /proc/{pid}/status")


def rss(pid: int) -> int:
    return status_bytes(pid, "VmRSS")


def hwm(pid: int) -> int:
    return status_bytes(pid, "VmHWM")


def settle(pid: int, seconds: float = 0.5, step: float = 0.1) -> int:
    """VmRSS once it stopped changing for `seconds` (at most 10 s of waiting), in bytes."""
    deadline = time.monotonic() + 10
    last, since = rss(pid), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(step)
        now = rss(pid)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= seconds:
            break
    return last


class Peak:
    """`with Peak(pid) as peak: ...`, then `peak.bytes`: the highest VmRSS while the block ran,
    sampled every `interval` seconds in a thread, or VmHWM where the high-water mark rose meanwhile
    (it catches a peak between two samples; in a fresh process it is the peak itself)."""

    def __init__(self, pid: int, interval: float = 0.002):
        self.pid, self.interval = pid, interval
        self.bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            try:
                self.bytes = max(self.bytes, rss(self.pid))
            except (OSError, KeyError):
                return  # the process is gone: its caller will say so
            time.sleep(self.interval)

    def __enter__(self) -> "Peak":
        self._hwm_before = hwm(self.pid)
        self.bytes = rss(self.pid)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        try:
            self.bytes = max(self.bytes, rss(self.pid))
            after = hwm(self.pid)
        except (OSError, KeyError):
            return
        if after > self._hwm_before:
            self.bytes = max(self.bytes, after)
