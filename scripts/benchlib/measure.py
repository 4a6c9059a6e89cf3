"""One measured run of a row against a target: memrelay-bench's results, the target process's
CPU time per request, and the work check of the servers' counters (scripts/benchlib/workcheck.py)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from memrelay_lab.plumbing.processes import cpu_split

from . import peers, workcheck
from .rows import Row


def bench_argv(bin_dir: Path, ports: list[int], row: Row, seconds: float, out: Path,
               tls_ca: Path | None = None) -> list[str]:
    argv = [peers.find("memrelay-bench", bin_dir, "run `make build`")]
    for port in ports:
        argv += ["--server", f"127.0.0.1:{port}"]
    argv += [
        "--threads", "1", "--clients", str(row.clients), "--pipeline", str(row.pipeline),
        "--ratio", row.ratio, "--multiget", str(row.multiget), "--data-size", str(row.data_size),
        "--key-prefix", row.key_prefix, "--key-maximum", str(row.keys - 1),
        "--test-time", str(seconds), "--json-out", str(out), "--quiet",
    ]
    argv += ["--tls-ca", str(tls_ca)] if tls_ca else []
    return argv + (["--rate", str(row.rate)] if row.rate else [])


def populate(bin_dir: Path, port: int, row: Row) -> None:
    """Sets every key of the row's range once on the memcached on `port`."""
    argv = [peers.find("memrelay-bench", bin_dir, "run `make build`"), "--server", f"127.0.0.1:{port}", "--populate",
            "--key-prefix", row.key_prefix, "--key-maximum", str(row.keys - 1), "--data-size", str(row.data_size),
            "--quiet", "--threads", "1", "--clients", "8"]
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, timeout=300)


def measure(bin_dir: Path, pid: int, port: int, servers: list[int], row: Row, seconds: float, out: Path,
            direct: bool, tls_ca: Path | None = None) -> dict:
    """One run of the row against the target on `port`: bench results, CPU, work check.
    `servers`: the ports the servers' counters are read on (a TLS server's plain port);
    `direct`: the target is the first server itself."""
    counters_before = [workcheck.server_counters(p) for p in servers]
    user0, sys0 = cpu_split(pid)
    subprocess.run(bench_argv(bin_dir, [port], row, seconds, out, tls_ca), check=True, stdout=subprocess.DEVNULL,
                   timeout=seconds + 60)
    user1, sys1 = cpu_split(pid)
    counters_after = [workcheck.server_counters(p) for p in servers]
    result = json.loads(out.read_text())
    totals = result["totals"]
    requests = max(totals["count"], 1)
    get_keys = sum((result.get(kind) or {}).get("keys", 0) for kind in ("get", "multiget"))
    sets = (result.get("set") or {}).get("count", 0)
    per_server = workcheck.deltas(counters_before, counters_after)
    return {
        "requests": totals["count"],
        "ops_per_sec": totals["ops_per_sec"],
        "p50_us": totals["latency_us"]["p50"],
        "p99_us": totals["latency_us"]["p99"],
        "errors": totals["errors"],
        "misses": totals["misses"],
        "cpu_us_per_request": ((user1 - user0) + (sys1 - sys0)) * 1e6 / requests,
        "user_us_per_request": (user1 - user0) * 1e6 / requests,
        "system_us_per_request": (sys1 - sys0) * 1e6 / requests,
        "server_counts": per_server,
        "work_problems": workcheck.problems(row, sets, get_keys, per_server, direct),
    }
