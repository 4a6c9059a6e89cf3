#!/usr/bin/env python3
"""How each target's cost grows: with value size, keys per get, idle connections and large replies.

One memcached (`-I 32m -m 2048`, so that 1 MB and 20 MB values fit) holds every row's keys; the
targets sit in front of it: memcached direct (the bench talks to the server itself: the
reference, not a peer), twemproxy, memcached's proxy (scripts/build-memcached-proxy.sh's build
or MEMCACHED_PROXY; `-I 32m`) and memrelay evented and pool. Four parts, each a set of rows:

- `cpu`: ops/s and the target process's CPU µs per request (user + system, /proc) of gets and sets
  of 1 KiB, 16 KiB, 100 KiB and 512 KiB values, and of gets of 10, 50 and 100 keys of 1 KiB
  (memrelay-bench, 8 clients, the servers' counters checked as in scripts/bench_proxies.py);
  targets started once, runs interleaved and repeated.
- `idle`: RSS per idle connection at 1,000, 5,000 and 10,000 client connections that each did one
  small get (a fresh target each time; its RSS after, minus its RSS before, over the connections).
- `amplify`: one get naming a 1 MB value 500 times (a 2 KB request line, a 500 MB reply read at
  full speed on one connection): the target's peak RSS above its baseline during the reply
  (VmRSS sampled every 2 ms, and VmHWM of the fresh process), and the RSS it keeps 2 s after.
- `big`: 100 connections each read one 20 MB reply at once, then idle: RSS kept 2 s after.

Medians of the repetitions and, against memcached direct, medians of the per-repetition ratios;
figures (CPU per request against value size and keys per get, RSS per idle connection against
connections) in the output folder when matplotlib is there (the lab's environment).

    lab/.venv/bin/python scripts/bench_memory.py           # every part (make bench), ~15 min
    BENCH_QUICK=1 lab/.venv/bin/python scripts/bench_memory.py   # one short repetition
    scripts/bench_memory.py --connections 100000            # idle connections to memrelay only
    scripts/bench_memory.py --baseline-bin DIR              # also DIR/memrelay beside this build (before/after)

With `--baseline-bin DIR` every memrelay target also runs from the earlier build in DIR
(NAME@baseline, scripts/benchlib/beforeafter.py), interleaved with this build in every part, and two
more tables follow: per cpu row, after / before of CPU per request and of ops/s (medians of the
per-repetition ratios) beside the lowest CPU per request of a peer; per memory row, before and after.

The descriptor limit is raised for this process and every target it starts; connections come
from 127.0.0.1, .2, ... so that ephemeral ports never run short. Every process started here is
stopped on exit, also on Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import beforeafter, bigreplies, connections, human, peers, rss  # noqa: E402
from benchlib.measure import measure, populate  # noqa: E402
from memrelay_lab.plumbing.processes import Processes, free_port, wait_for_port  # noqa: E402
from benchlib.peers import with_option  # noqa: E402
from benchlib.rows import Row  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(os.environ.get("MEMRELAY_BIN_DIR", ROOT / "target" / "release"))
DEFAULT_TARGETS = ["memcached", "twemproxy", "memcached-proxy", f"memrelay-evented/{peers.CORES}", "memrelay-pool"]
PARTS = ("cpu", "idle", "amplify", "big")
KIB = 1024
# Value size -> keys filled (about 1 MB to 32 MB of values per size).
SIZES = {1 * KIB: 1000, 16 * KIB: 500, 100 * KIB: 200, 512 * KIB: 64}
KEYS_PER_GET = (10, 50, 100)
CLIENTS = 8
IDLE_COUNTS = (1_000, 5_000, 10_000)
IDLE_KEY = "idle"  # the small value each idle connection gets once
AMPLIFY = ("amp", 1_000_000, 500)  # key, value bytes, times named in one get
BIG = ("big", 20_000_000, 100)  # key, value bytes, connections
MAX_ITEM = 32 << 20  # memcached -I 32m, memcached's proxy -I 32m, memrelay --max-value-size
SERVER_TIMEOUT_MS = 60_000  # memrelay --server-timeout-ms: the large replies' rows measure memory, not time
KEPT_AFTER = 2.0  # seconds after the reply that the kept RSS is read


@dataclass(frozen=True)
class Scale:
    """How big the memory rows are (smaller in quick mode)."""

    idle_counts: tuple[int, ...] = IDLE_COUNTS
    amplify_times: int = AMPLIFY[2]
    big_connections: int = BIG[2]


def cpu_rows() -> list[tuple[Row, str]]:
    """The workloads of the `cpu` part, each with its operation (get or set)."""
    rows = []
    for op, ratio in (("get", "0:1"), ("set", "1:0")):
        for size, keys in SIZES.items():
            rows.append((Row(f"{op} {human.size(size)}", ratio, CLIENTS, data_size=size, keys=keys,
                             key_prefix=f"v{size}-"), op))
    for count in KEYS_PER_GET:
        rows.append((Row(f"get {count} keys of 1 KiB", "0:1", CLIENTS, multiget=count, data_size=1 * KIB,
                         keys=SIZES[1 * KIB], key_prefix=f"v{1 * KIB}-"), "get"))
    return rows


def memcached_argv(port: int, max_connections: int) -> list[str]:
    argv = [peers.find("memcached", BIN, "run `make deps`"), "-l", "127.0.0.1", "-p", str(port), "-U", "0",
            "-m", "2048", "-I", f"{MAX_ITEM >> 20}m", "-t", "2", "-c", str(max_connections)]
    return argv + (["-u", "root"] if os.geteuid() == 0 else [])


def target_argv(name: str, listen: int, backend: int, work: Path, max_connections: int,
                baseline_bin: Path | None) -> list[str] | peers.Cannot:
    """The argv of a proxy target in front of `backend`, taking `max_connections` clients and the
    rows' large values (NAME@baseline: memrelay from `baseline_bin`)."""
    argv = peers.command(name, "single", listen, [backend], work, BIN, baseline_bin)
    if isinstance(argv, peers.Cannot):
        return argv
    if name == "memcached-proxy":
        return with_option(with_option(argv, "-c", str(max_connections)), "-I", f"{MAX_ITEM >> 20}m")
    if name.startswith("memrelay"):
        # --max-value-size bounds the values memrelay reads from servers too (default 1 MiB, below
        # the 20 MB row's); as memcached's -I here. Replies are not bounded: no --max-reply-bytes.
        # A server's 500 MB reply takes memrelay longer than its default --server-timeout-ms (1 s)
        # to read on a busy machine: it would answer SERVER_ERROR server timeout, not the row.
        for option, value in (("--max-clients", max_connections), ("--max-value-size", MAX_ITEM),
                              ("--server-timeout-ms", SERVER_TIMEOUT_MS)):
            argv = with_option(argv, option, str(value))
        return argv
    return argv  # twemproxy: no client limit below the descriptor limit


class Bed:
    """The backend memcached (filled once) and the targets started in front of it (memrelay's
    NAME@baseline targets from `baseline_bin`)."""

    def __init__(self, procs: Processes, work: Path, scale: Scale, parts: set[str], baseline_bin: Path | None = None):
        self.procs, self.work, self.scale, self.baseline_bin = procs, work, scale, baseline_bin
        self.backend = free_port()
        self.backend_proc = procs.start(memcached_argv(self.backend, 4096), work / "memcached.log")
        wait_for_port(self.backend, self.backend_proc)
        self.fill(self.backend, parts)

    def fill(self, port: int, parts: set[str]) -> None:
        bigreplies.store(port, IDLE_KEY, 10)
        if "cpu" in parts:
            for row, _ in cpu_rows():
                if row.multiget == 1:
                    populate(BIN, port, row)
        if "amplify" in parts:
            bigreplies.store(port, AMPLIFY[0], AMPLIFY[1])
        if "big" in parts:
            bigreplies.store(port, BIG[0], BIG[1])

    def start(self, name: str, max_connections: int, parts: set[str]):
        """A fresh target: (port, pid, process), or Cannot. memcached direct is a fresh memcached
        filled with what `parts` need."""
        listen = free_port()
        if name == "memcached":
            proc = self.procs.start(memcached_argv(listen, max_connections), self.work / "memcached-direct.log")
            wait_for_port(listen, proc)
            self.fill(listen, parts)
            return listen, proc.pid, proc
        argv = target_argv(name, listen, self.backend, self.work, max_connections, self.baseline_bin)
        if isinstance(argv, peers.Cannot):
            return argv
        proc = self.procs.start(argv, self.work / f"{name.replace('/', '-')}.log")
        wait_for_port(listen, proc)
        return listen, proc.pid, proc


def warm(port: int) -> None:
    """One small get on a connection of its own, closed: the target's connection to the server
    and its first buffers exist before the baseline is read."""
    s = connections.connect(port, 0)
    try:
        s.sendall(f"get {IDLE_KEY}\r\n".encode())
        connections.read_until(s, b"END\r\n")
    finally:
        s.close()


def memory_cell(bed: Bed, name: str, part: str, count: int) -> dict | str:
    """One measurement of a memory row on a fresh target: its numbers, or why there are none."""
    started = bed.start(name, count + 100, {part})
    if isinstance(started, peers.Cannot):
        return started.reason
    port, pid, proc = started
    held = []
    try:
        warm(port)
        baseline = rss.settle(pid)
        if part == "idle":
            held = connections.open_idle(port, count, f"get {IDLE_KEY}\r\n".encode())
            after = rss.settle(pid)
            return {"connections": count, "baseline_bytes": baseline, "after_bytes": after,
                    "bytes_per_connection": (after - baseline) / count}
        key, size, times = (AMPLIFY[0], AMPLIFY[1], count) if part == "amplify" else (BIG[0], BIG[1], 1)
        request = ("get " + " ".join([key] * times) + "\r\n").encode()
        with rss.Peak(pid) as peak:
            outcome, held = bigreplies.get_all(port, request, bigreplies.reply_length(key, size, times),
                                               connections=1 if part == "amplify" else count)
        problem = outcome.problem()
        if problem:
            return f"cannot: {problem}"
        time.sleep(KEPT_AFTER)
        kept = rss.rss(pid)
        return {"baseline_bytes": baseline, "peak_above_bytes": peak.bytes - baseline, "kept_above_bytes": kept - baseline,
                "request_bytes": len(request), "reply_bytes": sum(r.received for r in outcome.readings),
                "seconds": outcome.seconds}
    except (OSError, ConnectionError, TimeoutError, RuntimeError) as err:
        exited = proc.poll()
        return f"failed: {'exited with status ' + str(exited) + '; ' if exited is not None else ''}{err}"
    finally:
        connections.close_all(held)
        bed.procs.stop(proc)


def run_memory(bed: Bed, part: str, counts: tuple[int, ...], names: list[str], repetitions: int) -> list[dict]:
    """The rows of a memory part (one per count), each target measured `repetitions` times."""
    rows = []
    for count in counts:
        samples: dict[str, list] = {}
        for rep in range(repetitions):
            order = list(names)
            random.Random(rep * 7 + count).shuffle(order)
            for name in order:
                if isinstance(samples.get(name), str):
                    continue  # a target that cannot is not asked again
                print(f"bench: {part} {count:,} rep {rep + 1}/{repetitions} {name}", file=sys.stderr, flush=True)
                got = memory_cell(bed, name, part, count)
                if isinstance(got, str):
                    samples[name] = got
                else:
                    samples.setdefault(name, []).append(got | {"rep": rep})
        targets = {}
        for name in names:
            got = samples.get(name)
            if isinstance(got, str):
                targets[name] = {"cannot": got}
            elif got:
                keys = [k for k in got[0] if k.endswith("_bytes") or k in ("bytes_per_connection", "seconds")]
                targets[name] = {k: statistics.median(r[k] for r in got) for k in keys} | {"runs": got}
        rows.append({"part": part, "connections" if part != "amplify" else "times": count, "targets": targets})
    return rows


def run_cpu(bed: Bed, names: list[str], repetitions: int, seconds: float) -> list[dict]:
    """The `cpu` part: targets started once, rows and targets interleaved and repeated."""
    started = {name: bed.start(name, 1000, set()) if name != "memcached" else (bed.backend, bed.backend_proc.pid, None)
               for name in names}
    work = bed.work / "bench.json"
    rows = cpu_rows()
    samples: dict[tuple[str, str], list[dict]] = {}
    total, done, t0 = repetitions * len(rows) * len(names), 0, time.monotonic()
    for rep in range(repetitions):
        for i, (row, _) in enumerate(rows):
            order = list(names)
            random.Random(rep * 1000 + i).shuffle(order)
            for name in order:
                done += 1
                if isinstance(started[name], peers.Cannot):
                    continue
                left = (time.monotonic() - t0) / done * (total - done + 1) if done > 1 else total * (seconds + 1)
                print(f"bench: {done}/{total} rep {rep + 1} {row.name:<24} {name:<27} ~{left:.0f} s left",
                      file=sys.stderr, flush=True)
                port, pid, _ = started[name]
                result = measure(BIN, pid, port, [bed.backend], row, seconds, work, name == "memcached")
                result["rep"] = rep
                for problem in result["work_problems"]:
                    print(f"bench: WORK CHECK: {row.name} / {name}: {problem}", file=sys.stderr)
                samples.setdefault((row.name, name), []).append(result)
    for name, got in started.items():
        if not isinstance(got, peers.Cannot) and got[2] is not None:
            bed.procs.stop(got[2])
    table = []
    for row, op in rows:
        targets = {}
        reference = {r["rep"]: r for r in samples.get((row.name, "memcached"), [])}
        for name in names:
            if isinstance(started[name], peers.Cannot):
                targets[name] = {"cannot": started[name].reason}
                continue
            runs = samples.get((row.name, name), [])
            if not runs:
                continue
            cell = {k: statistics.median(r[k] for r in runs)
                    for k in ("ops_per_sec", "cpu_us_per_request", "user_us_per_request", "system_us_per_request",
                              "p99_us")}
            pairs = [(r, reference[r["rep"]]) for r in runs if r["rep"] in reference]
            if pairs and name != "memcached":
                cell["ops_ratio"] = statistics.median(r["ops_per_sec"] / ref["ops_per_sec"] for r, ref in pairs)
                cell["cpu_ratio"] = statistics.median(r["cpu_us_per_request"] / ref["cpu_us_per_request"]
                                                      for r, ref in pairs if ref["cpu_us_per_request"] > 0)
            cell["errors"] = sum(r["errors"] for r in runs)
            cell["work_problems"] = sorted({p for r in runs for p in r["work_problems"]})
            targets[name] = cell | {"runs": runs}
        table.append({"row": row.name, "op": op, "data_size": row.data_size, "multiget": row.multiget,
                      "targets": targets})
    return table


def print_cpu(table: list[dict], names: list[str]) -> None:
    print("\nops/s and CPU µs per request (the target process's user + system; memcached direct: the server's own);"
          "\n× direct: median over the repetitions of the ratio to memcached direct in the same repetition\n")
    lines = []
    for entry in table:
        for name, t in cells(entry, names):
            if "cannot" in t:
                lines.append(f"{entry['row']:<24} {name:<27} {t['cannot']}")
                continue
            flag = "  WORK CHECK FAILED" if t["work_problems"] else ""
            lines.append(f"{entry['row']:<24} {name:<27} {human.number(t['ops_per_sec']):>9} "
                         f"{human.number(t.get('ops_ratio'), 2):>8} {human.number(t['cpu_us_per_request'], 1):>10} "
                         f"{human.number(t.get('cpu_ratio'), 2):>8}{flag}")
        lines.append("")
    print_table(f"{'row':<24} {'target':<27} {'ops/s':>9} {'× direct':>8} {'cpu µs/req':>10} {'× direct':>8}", lines)


def print_memory(rows: list[dict], names: list[str]) -> None:
    if not rows:
        return
    print("memory: the target process's RSS (VmRSS) above its own before the row (a fresh process each "
          "measurement; medians)\n")
    lines = []
    for entry in rows:
        for label, key in labels(entry):
            lines += [f"{label:<52} {name:<27} " + (t["cannot"] if "cannot" in t else f"{human.size(t[key]):>12}")
                      for name, t in cells(entry, names)] + [""]
    print_table(f"{'row':<52} {'target':<27} {'value':>12}", lines)


def before_after_cpu(table: list[dict], names: list[str]) -> list[dict]:
    """Per cpu row and memrelay target with a baseline: CPU per request and ops/s before and after,
    their after / before ratios, and the lowest CPU per request among the peers."""
    out = []
    for entry in table:
        peer_cpu = [t["cpu_us_per_request"] for name, t in entry["targets"].items()
                    if peers.is_peer(name) and "cannot" not in t and t.get("cpu_us_per_request")]
        best_peer = min(peer_cpu, default=None)
        for name, after, before in beforeafter.pairs(entry["targets"], names):
            out.append({"row": entry["row"], "target": name,
                        "cpu_before": before["cpu_us_per_request"], "cpu_after": after["cpu_us_per_request"],
                        "cpu_ratio": beforeafter.ratio(after, before, "cpu_us_per_request"),
                        "ops_before": before["ops_per_sec"], "ops_after": after["ops_per_sec"],
                        "ops_ratio": beforeafter.ratio(after, before, "ops_per_sec"),
                        "best_peer_cpu": best_peer,
                        "after_of_best_peer": after["cpu_us_per_request"] / best_peer if best_peer else None})
    return out


def print_before_after_cpu(lines_of: list[dict]) -> None:
    if not lines_of:
        return
    print("this build (after) against the baseline build (before), memrelay: CPU µs per request and ops/s "
          "(medians);\n× = after / before, the median of the per-repetition ratios;\nbest peer = the lowest CPU µs "
          "per request of twemproxy and memcached's proxy; ÷ peer = cpu after / best peer\n")
    n = human.number
    lines = [f"{r['row']:<24} {r['target']:<20} {n(r['cpu_before'], 1):>9} {n(r['cpu_after'], 1):>9} "
             f"{n(r['cpu_ratio'], 2):>6} {n(r['ops_before']):>9} {n(r['ops_after']):>9} {n(r['ops_ratio'], 2):>6} "
             f"{n(r['best_peer_cpu'], 1):>9} {n(r['after_of_best_peer'], 2):>7}" for r in lines_of]
    print_table(f"{'row':<24} {'target':<20} {'cpu bef.':>9} {'cpu aft.':>9} {'cpu ×':>6} {'ops bef.':>9} "
                f"{'ops aft.':>9} {'ops ×':>6} {'best peer':>9} {'÷ peer':>7}", lines + [""])


def before_after_memory(rows: list[dict], names: list[str]) -> list[dict]:
    """Per memory row and memrelay target with a baseline: the figure before and after."""
    return [{"row": label, "target": name, "before": before[key], "after": after[key]}
            for entry in rows for label, key in labels(entry)
            for name, after, before in beforeafter.pairs(entry["targets"], names)]


def print_before_after_memory(lines_of: list[dict]) -> None:
    if not lines_of:
        return
    print("this build (after) against the baseline build (before), memrelay: RSS above the target's own before "
          "the row (medians)\n")
    lines = [f"{r['row']:<52} {r['target']:<20} {human.size(r['before']):>12} {human.size(r['after']):>12}"
             for r in lines_of]
    print_table(f"{'row':<52} {'target':<20} {'before':>12} {'after':>12}", lines + [""])


def cells(entry: dict, names: list[str]) -> list[tuple[str, dict]]:
    """A row's cells in the order of `names` (targets it has no cell for left out)."""
    return [(name, entry["targets"][name]) for name in names if name in entry["targets"]]


def print_table(header: str, lines: list[str]) -> None:
    print(header)
    print("-" * len(header))
    print("\n".join(lines))


def labels(entry: dict) -> list[tuple[str, str]]:
    if entry["part"] == "idle":
        return [(f"RSS per idle connection, {entry['connections']:,} connections", "bytes_per_connection")]
    if entry["part"] == "amplify":
        what = f"get of a 1 MB value × {entry['times']:,}"
        return [(f"{what}: peak above baseline", "peak_above_bytes"), (f"{what}: kept {KEPT_AFTER:g} s after", "kept_above_bytes")]
    what = f"{entry['connections']:,} conns after one 20 MB reply each"
    return [(f"{what}: kept", "kept_above_bytes"), (f"{what}: peak", "peak_above_bytes")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="length of one cpu measurement")
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--quick", action="store_true", default=os.environ.get("BENCH_QUICK") == "1",
                        help="one short repetition of smaller memory rows (also BENCH_QUICK=1): checks, not claims")
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of {', '.join(PARTS)}")
    parser.add_argument("--targets", default=None, help="comma-separated, e.g. twemproxy,memrelay-evented/2")
    parser.add_argument("--connections", type=int, default=None,
                        help="instead of the parts: RSS per idle connection at this many connections (e.g. 100000), "
                             "memrelay's targets only unless --targets says otherwise")
    parser.add_argument("--baseline-bin", type=Path, default=None,
                        help="a directory with an earlier memrelay build: every memrelay target also runs from it, "
                             "named NAME@baseline, interleaved with this build (before/after in one run)")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "bench" / "memory",
                        help="folder of the JSON and the figures")
    args = parser.parse_args()
    parts = [p.strip() for p in args.parts.split(",")]
    if unknown := [p for p in parts if p not in PARTS]:
        parser.error(f"unknown part(s) {unknown}; parts are {', '.join(PARTS)}")
    scale = Scale()
    if args.quick:
        args.seconds, args.repetitions = 0.5, 1
        scale = Scale(idle_counts=(100, 300), amplify_times=50, big_connections=5)
    names = DEFAULT_TARGETS
    if args.connections:
        parts, scale = ["idle"], Scale(idle_counts=(args.connections,))
        names = [f"memrelay-evented/{peers.CORES}"]
        if not args.quick and args.repetitions == parser.get_default("repetitions"):
            args.repetitions = 1
    names = args.targets.split(",") if args.targets else names
    if args.baseline_bin:
        if why := beforeafter.problem(args.baseline_bin):
            parser.error(why)
        names = beforeafter.with_baselines(names)
    most = max(scale.idle_counts) if "idle" in parts else 1000
    limit = connections.raise_descriptor_limit(most + 1000)
    if limit < most + 200:
        parser.error(f"the descriptor limit is {limit:,} and this process may not raise it (that takes root with "
                     f"CAP_SYS_RESOURCE, up to fs.nr_open): {most:,} connections need {most + 1000:,}; "
                     f"at most --connections {max(limit - 1000, 0):,} here")
    if "memcached-proxy" in names and peers.memcached_proxy_binary() is None:
        print(f"bench: memcached-proxy {peers.MEMCACHED_PROXY_ABSENT}",
              file=sys.stderr)

    procs = Processes()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    started_at = time.monotonic()
    result: dict = {"targets": names, "repetitions": args.repetitions, "seconds": args.seconds, "quick": args.quick,
                    "descriptor_limit": limit, "baseline_bin": str(args.baseline_bin) if args.baseline_bin else None}
    try:
        with tempfile.TemporaryDirectory(prefix="memrelay-bench-memory-") as tmp:
            bed = Bed(procs, Path(tmp), scale, set(parts), args.baseline_bin)
            if "cpu" in parts:
                result["cpu"] = run_cpu(bed, names, args.repetitions, args.seconds)
            memory = []
            if "idle" in parts:
                memory += run_memory(bed, "idle", scale.idle_counts, names, args.repetitions)
            if "amplify" in parts:
                memory += run_memory(bed, "amplify", (scale.amplify_times,), names, args.repetitions)
            if "big" in parts:
                memory += run_memory(bed, "big", (scale.big_connections,), names, args.repetitions)
            result["idle"] = [r for r in memory if r["part"] == "idle"]
            result["amplify"] = [r for r in memory if r["part"] == "amplify"]
            result["big"] = [r for r in memory if r["part"] == "big"]
    finally:
        procs.stop_all()

    minutes = (time.monotonic() - started_at) / 60
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    result["load_average"] = os.getloadavg()
    print(f"\nmemory and growth bench: {args.repetitions} repetition(s), {minutes:.1f} min in all; "
          f"{os.cpu_count()} cores, load average now {load}")
    if result.get("cpu"):
        print_cpu(result["cpu"], names)
    memory = result["idle"] + result["amplify"] + result["big"]
    print_memory(memory, names)
    if args.baseline_bin:
        result["before_after"] = {"cpu": before_after_cpu(result.get("cpu", []), names),
                                  "memory": before_after_memory(memory, names)}
        print_before_after_cpu(result["before_after"]["cpu"])
        print_before_after_memory(result["before_after"]["memory"])
    args.out.mkdir(parents=True, exist_ok=True)
    json_out = args.out / ("connections.json" if args.connections else "memory.json")
    json_out.write_text(json.dumps(result, indent=2))
    print(f"written: {json_out}")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("bench: figures skipped: no matplotlib here (run with lab/.venv/bin/python after `make deps`)",
              file=sys.stderr)
        return 0
    from benchlib import plots

    for path in plots.draw(result, args.out):
        print(f"written: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
