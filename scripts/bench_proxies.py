#!/usr/bin/env python3
"""Side-by-side benchmark of memcached direct, twemproxy and memrelay's engines.

Every target sits in front of the same memcached and is driven by memrelay-bench with the same
workload; rows and targets are interleaved and repeated, so slow drift of this shared machine
hits every target alike. Reported per row and target: median throughput, p50 and p99 latency,
and the proxy process's CPU time per request (from /proc/PID/stat), with ratios to twemproxy.

    scripts/bench_proxies.py                      # the proxy comparison (make bench)
    scripts/bench_proxies.py --measurement-cost   # memrelay with and without --stats-dir
    scripts/bench_proxies.py --baseline-bin DIR   # also DIR/memrelay beside this build (before/after)

Standard library only. Every process it starts is stopped on exit, also on Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(os.environ.get("MEMRELAY_BIN_DIR", ROOT / "target" / "release"))
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, from /proc (fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


@dataclass
class Processes:
    """Every process started here, stopped together."""

    started: list[subprocess.Popen] = field(default_factory=list)

    def start(self, argv: list[str], log: Path) -> subprocess.Popen:
        with open(log, "wb") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self.started.append(proc)
        return proc

    def stop_all(self) -> None:
        for proc in self.started:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.started:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def find(binary: str, hint: str) -> str:
    for candidate in (BIN / binary, Path("/usr/sbin") / binary, Path("/usr/bin") / binary):
        if candidate.exists():
            return str(candidate)
    found = shutil.which(binary)
    if not found:
        sys.exit(f"bench: error: {binary} not found; {hint}")
    return found


@dataclass(frozen=True)
class Row:
    name: str
    ratio: str
    clients: int
    pipeline: int


ROWS = [
    Row("read 16", "0:1", 16, 1),
    Row("read 64", "0:1", 64, 1),
    Row("read 16x16 pipelined", "0:1", 16, 16),
    Row("write 16", "1:0", 16, 1),
    Row("write 64", "1:0", 64, 1),
    Row("write 16x16 pipelined", "1:0", 16, 16),
]


def run_bench(port: int, row: Row, seconds: float, keys: int, out: Path) -> dict:
    argv = [
        find("memrelay-bench", "run `make build`"),
        "--server", f"127.0.0.1:{port}",
        "--threads", "1",
        "--clients", str(row.clients),
        "--pipeline", str(row.pipeline),
        "--ratio", row.ratio,
        "--data-size", "1024",
        "--key-maximum", str(keys),
        "--test-time", str(seconds),
        "--json-out", str(out),
        "--quiet",
    ]
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, timeout=seconds + 30)
    return json.loads(out.read_text())


def measure(target_pid: int | None, port: int, row: Row, seconds: float, keys: int, out: Path) -> dict:
    before = cpu_seconds(target_pid) if target_pid else 0.0
    result = run_bench(port, row, seconds, keys, out)
    after = cpu_seconds(target_pid) if target_pid else 0.0
    totals = result["totals"]
    requests = max(totals["count"], 1)
    return {
        "ops_per_sec": totals["ops_per_sec"],
        "p50_us": totals["latency_us"]["p50"],
        "p99_us": totals["latency_us"]["p99"],
        "errors": totals["errors"],
        "cpu_us_per_request": (after - before) * 1e6 / requests if target_pid else None,
    }


def start_targets(procs: Processes, work: Path, memcached_port: int, which: list[str],
                  baseline_bin: Path | None = None) -> dict[str, tuple[int, int | None]]:
    """Starts each target in front of the memcached; returns name -> (port, pid to measure).

    A memrelay target whose name ends in `@baseline` runs `baseline_bin/memrelay` (an earlier build)."""
    targets: dict[str, tuple[int, int | None]] = {}
    for name in which:
        memrelay = find("memrelay", "run `make build`")
        if name.endswith("@baseline"):
            memrelay = str(baseline_bin / "memrelay")
        port = free_port()
        if name == "memcached":
            targets[name] = (memcached_port, None)
            continue
        if name == "twemproxy":
            conf = work / "nutcracker.yml"
            conf.write_text(
                "pool:\n"
                f"  listen: 127.0.0.1:{port}\n"
                "  hash: md5\n  distribution: ketama\n  auto_eject_hosts: false\n"
                "  server_connections: 1\n"
                f"  servers:\n   - 127.0.0.1:{memcached_port}:1\n"
            )
            argv = [find("nutcracker", "run `make deps`"), "-c", str(conf), "-s", str(free_port()), "-o", str(work / "nutcracker.log")]
        elif name.startswith("memrelay"):
            # memrelay-ENGINE[/N][+stats]: N workers (pool) or event threads (evented).
            engine, _, stats = name.removeprefix("memrelay-").removesuffix("@baseline").partition("+")
            engine, _, count = engine.partition("/")
            argv = [memrelay, "--engine", engine, "--listen", f"127.0.0.1:{port}", "--server", f"127.0.0.1:{memcached_port}"]
            if engine == "pool":
                argv += ["--workers", count or "16"]
            else:
                argv += ["--threads", count or str(os.cpu_count() or 1)]
            if stats == "stats":
                argv += ["--stats-dir", str(work / f"stats-{engine}-{count}")]
        else:
            raise ValueError(name)
        proc = procs.start(argv, work / f"{name.replace('/', '-')}.log")
        wait_for_port(port)
        targets[name] = (port, proc.pid)
    return targets


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=4.0, help="length of one measurement")
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--rows", default=None, help="comma-separated row names (default: all)")
    parser.add_argument("--measurement-cost", action="store_true", help="memrelay with and without --stats-dir")
    parser.add_argument("--targets", default=None, help="comma-separated targets, e.g. twemproxy,memrelay-evented/1")
    parser.add_argument("--baseline-bin", type=Path, default=None,
                        help="a directory with an earlier memrelay build: every memrelay target also runs from it, "
                             "named NAME@baseline, interleaved with this build (before/after in one run)")
    parser.add_argument("--json-out", type=Path, default=ROOT / "results" / "bench" / "proxies.json")
    args = parser.parse_args()

    rows = ROWS if not args.rows else [r for r in ROWS if r.name in args.rows.split(",")]
    if args.measurement_cost:
        names = ["memrelay-pool", "memrelay-pool+stats", "memrelay-evented", "memrelay-evented+stats"]
        rows = [r for r in rows if r.pipeline == 1 and r.clients == 16] if not args.rows else rows
        baseline = None
        if args.json_out == parser.get_default("json_out"):
            args.json_out = ROOT / "results" / "bench" / "measurement-cost.json"
    else:
        names = ["memcached", "twemproxy", "memrelay-pool", "memrelay-evented"]
        baseline = "twemproxy"

    if args.targets:
        names = args.targets.split(",")
        baseline = baseline if baseline in names else None
    if args.baseline_bin:
        if not (args.baseline_bin / "memrelay").is_file():
            parser.error(f"no memrelay binary in {args.baseline_bin}")
        names = [n for name in names for n in ([name, f"{name}@baseline"] if name.startswith("memrelay") else [name])]
    procs = Processes()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    samples: dict[tuple[str, str], list[dict]] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="memrelay-bench-") as tmp:
            work = Path(tmp)
            memcached_port = free_port()
            memcached = [find("memcached", "run `make deps`"), "-l", "127.0.0.1", "-p", str(memcached_port), "-U", "0", "-m", "256", "-t", "2"]
            if os.geteuid() == 0:
                memcached += ["-u", "root"]
            procs.start(memcached, work / "memcached.log")
            wait_for_port(memcached_port)
            keys = 10_000
            populate = [find("memrelay-bench", "run `make build`"), "--server", f"127.0.0.1:{memcached_port}", "--populate",
                        "--key-maximum", str(keys), "--data-size", "1024", "--quiet", "--threads", "1", "--clients", "8"]
            subprocess.run(populate, check=True, stdout=subprocess.DEVNULL, timeout=120)
            targets = start_targets(procs, work, memcached_port, names, args.baseline_bin)
            total = args.repetitions * len(rows) * len(names)
            done = 0
            started = time.monotonic()
            for rep in range(args.repetitions):
                for row in rows:
                    order = names[:]
                    random.Random(rep * 1000 + rows.index(row)).shuffle(order)
                    for name in order:
                        done += 1
                        left = (time.monotonic() - started) / done * (total - done) if done > 1 else total * args.seconds
                        print(f"bench: {done}/{total} rep {rep + 1} {row.name:<22} {name:<26} ~{left:.0f} s left", file=sys.stderr, flush=True)
                        port, pid = targets[name]
                        result = measure(pid, port, row, args.seconds, keys, work / "bench.json")
                        samples.setdefault((row.name, name), []).append(result)
    finally:
        procs.stop_all()

    table = summarize(samples, rows, names, baseline)
    print_table(table, names, baseline, args)
    print_before_after(table, names)
    args.json_out.parent.mkdir(parents=True, exist_ok=True)
    args.json_out.write_text(json.dumps({"seconds": args.seconds, "repetitions": args.repetitions, "rows": table}, indent=2))
    print(f"\nwritten: {args.json_out}")
    return 0


def median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def summarize(samples, rows, names, baseline):
    table = []
    for row in rows:
        entry = {"row": row.name, "targets": {}}
        for name in names:
            runs = samples[(row.name, name)]
            entry["targets"][name] = {
                "ops_per_sec": median([r["ops_per_sec"] for r in runs]),
                "p50_us": median([r["p50_us"] for r in runs]),
                "p99_us": median([r["p99_us"] for r in runs]),
                "cpu_us_per_request": median([r["cpu_us_per_request"] for r in runs]),
                "errors": sum(r["errors"] for r in runs),
                "runs": runs,
            }
        reference = entry["targets"].get(baseline) if baseline else entry["targets"][names[0]]
        for name in names:
            t = entry["targets"][name]
            t["throughput_ratio"] = t["ops_per_sec"] / reference["ops_per_sec"] if reference["ops_per_sec"] else None
            cpu, ref_cpu = t["cpu_us_per_request"], reference["cpu_us_per_request"]
            t["cpu_ratio"] = cpu / ref_cpu if cpu and ref_cpu else None
        table.append(entry)
    return table


def print_before_after(table, names) -> None:
    """This build against the baseline build, per row: throughput and CPU per request ratios."""
    pairs = [n for n in names if f"{n}@baseline" in names]
    if not pairs:
        return
    print("this build / baseline build (medians): throughput ratio, CPU-per-request ratio\n")
    for entry in table:
        for name in pairs:
            new, old = entry["targets"][name], entry["targets"][f"{name}@baseline"]
            tput = new["ops_per_sec"] / old["ops_per_sec"] if old["ops_per_sec"] else float("nan")
            cpu = (new["cpu_us_per_request"] / old["cpu_us_per_request"]
                   if new["cpu_us_per_request"] and old["cpu_us_per_request"] else float("nan"))
            print(f"{entry['row']:<22} {name:<26} throughput x{tput:.3f}   cpu/req x{cpu:.3f}")
    print()


def print_table(table, names, baseline, args) -> None:
    reference = baseline or names[0]
    print(f"\nmedians of {args.repetitions} interleaved runs of {args.seconds:g} s; ratios against {reference}\n")
    header = f"{'row':<22} {'target':<26} {'ops/s':>10} {'x':>6} {'p50 us':>8} {'p99 us':>8} {'cpu us/req':>10} {'x':>6}"
    print(header)
    print("-" * len(header))
    for entry in table:
        for name in names:
            t = entry["targets"][name]
            cpu = f"{t['cpu_us_per_request']:.1f}" if t["cpu_us_per_request"] is not None else "-"
            cpu_ratio = f"{t['cpu_ratio']:.2f}" if t["cpu_ratio"] is not None else "-"
            print(f"{entry['row']:<22} {name:<26} {t['ops_per_sec']:>10.0f} {t['throughput_ratio']:>6.2f} "
                  f"{t['p50_us']:>8.0f} {t['p99_us']:>8.0f} {cpu:>10} {cpu_ratio:>6}")
        print()


if __name__ == "__main__":
    sys.exit(main())
