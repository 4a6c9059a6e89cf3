"""Where a target's time goes while it serves a row: profilers attached to its process.

Each tool gets its own measurement (each slows the target differently; strace most), and
every figure is per request answered in that measurement:
- `perf stat` (software events: this machine's VM has no hardware counters): CPU time,
  context switches, migrations;
- `perf record -e cpu-clock`: the share of samples in the kernel, in the target's own code
  and in libraries, and the hottest symbols;
- `strace -c -f`: system calls per request, by name (strace stops the target at every call,
  so its throughput then means nothing; the counts per request do).
"""

from __future__ import annotations

import re
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

# A measurement: runs the bench once, returns the requests answered.
Measurement = Callable[[], int]


def attached(argv: list[str], measurement: Measurement, log: Path) -> tuple[int, str]:
    """Runs `argv` (a profiler attached with -p) around one measurement; (requests, its report)."""
    with open(log, "wb") as out:
        tool = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        time.sleep(0.5)  # attach before the load starts
        requests = measurement()
    finally:
        tool.send_signal(signal.SIGINT)
        try:
            tool.wait(timeout=30)
        except subprocess.TimeoutExpired:
            tool.kill()
            tool.wait()
    return requests, log.read_text(errors="replace")


def perf_stat(pid: int, measurement: Measurement, work: Path) -> dict:
    events = "task-clock,context-switches,cpu-migrations,page-faults"
    requests, text = attached(["perf", "stat", "-x", ",", "-e", events, "-p", str(pid)], measurement, work / "perf-stat.txt")
    values = {}
    for line in text.splitlines():
        parts = line.split(",")
        if len(parts) > 3 and parts[2] in events.split(",") and parts[0].replace(".", "").isdigit():
            values[parts[2]] = float(parts[0])
    return {
        "requests": requests,
        "cpu_us_per_request": values.get("task-clock", 0) * 1e3 / max(requests, 1),  # task-clock is in ms
        "context_switches_per_request": values.get("context-switches", 0) / max(requests, 1),
        "migrations_per_request": values.get("cpu-migrations", 0) / max(requests, 1),
    }


def perf_record(pid: int, measurement: Measurement, work: Path, top: int = 12) -> dict:
    data = work / "perf.data"
    attached(["perf", "record", "-q", "-e", "cpu-clock", "-F", "4999", "-o", str(data), "-p", str(pid)],
             measurement, work / "perf-record.txt")
    by_dso = report(data, "dso")
    symbols = report(data, "dso,sym")[:top]
    kernel = sum(share for name, share in by_dso if "kernel" in name)
    return {"kernel_share": kernel, "by_dso": by_dso[:6], "top_symbols": symbols}


def report(data: Path, sort: str) -> list[tuple[str, float]]:
    text = subprocess.run(["perf", "report", "-i", str(data), "--sort", sort, "--stdio", "--no-children"],
                          capture_output=True, text=True, timeout=120).stdout
    rows = []
    for line in text.splitlines():
        match = re.match(r"\s*([\d.]+)%\s+(.*\S)", line)
        if match:
            rows.append((re.sub(r"\s+", " ", match.group(2)), float(match.group(1)) / 100))
    return rows


def strace_counts(pid: int, measurement: Measurement, work: Path) -> dict:
    requests, text = attached(["strace", "-c", "-f", "-p", str(pid)], measurement, work / "strace.txt")
    calls = {}
    for line in text.splitlines():
        parts = line.split()
        # % time, seconds, usecs/call, calls, [errors,] syscall
        if len(parts) >= 5 and parts[0].replace(".", "").isdigit() and parts[-1] != "total":
            calls[parts[-1]] = int(parts[3])
    per_request = {name: count / max(requests, 1) for name, count in sorted(calls.items(), key=lambda kv: -kv[1])}
    return {"requests": requests, "syscalls_per_request": sum(per_request.values()), "by_call": per_request}
