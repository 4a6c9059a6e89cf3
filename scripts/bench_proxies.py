#!/usr/bin/env python3
"""Side-by-side benchmark of memrelay against memcached direct, twemproxy and memcached's proxy.

Three memcached servers are started and filled with the same keys; every target sits in front
of the servers its row needs (scripts/benchlib/rows.py) and is driven by memrelay-bench with the
same workload. Rows and targets are interleaved and repeated, so slow drift of this shared
machine hits every target alike. Reported per row and target: median throughput, p50 and p99
latency, and the target process's CPU time per request (user + system, from /proc/PID/stat);
per row, memrelay's better thread setting against the best peer. After every measurement the
servers' counters must show that the target did the row's job (scripts/benchlib/workcheck.py).

    scripts/bench_proxies.py                      # the proxy comparison (make bench)
    BENCH_QUICK=1 scripts/bench_proxies.py        # one short repetition, for development
    scripts/bench_proxies.py --measurement-cost   # memrelay with and without --stats-dir
    scripts/bench_proxies.py --routing-cost       # memrelay with no routes and with 100 routes over 3 pools
    scripts/bench_proxies.py --baseline-bin DIR   # also DIR/memrelay beside this build (before/after)
    BENCH_QUICK=1 scripts/bench_proxies.py --rows "TLS read 16"   # what TLS costs (with "read 16")

memcached's proxy is not packaged: scripts/build-memcached-proxy.sh builds it (cached outside
the repository), or MEMCACHED_PROXY=/path/to/memcached (built with --enable-proxy) names another;
without either its cells say so. Runs in the lab's Python (lab/.venv/bin/python): the peers are
started with the lab's memrelay_lab.plumbing. Every process it starts is stopped on exit, also
on Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import tempfile
import time
from pathlib import Path

from benchlib import beforeafter, peers, profile, rows as rowlib, tls as tlslib
from benchlib.measure import measure as measure_cell, populate
from memrelay_lab.plumbing.processes import Processes, free_port, wait_for_port
from benchlib.summary import CPU_BAR, THROUGHPUT_BAR, summarize

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(os.environ.get("MEMRELAY_BIN_DIR", ROOT / "target" / "release"))
FILL = rowlib.Row("fill", "1:0", 8)  # every row here reads and writes the rows' default keys and values
DEFAULT_TARGETS = ["memcached", "twemproxy", "memcached-proxy", "memrelay-evented/1", f"memrelay-evented/{peers.CORES}"]


def measure(pid: int, port: int, servers: list[int], row: rowlib.Row, seconds: float, out: Path,
            direct: bool) -> dict:
    """One run of the row against the target on `port` (scripts/benchlib/measure.py)."""
    tls_ca = tlslib.files(out.parent).ca if row.tls else None
    return measure_cell(BIN, pid, port, servers, row, seconds, out, direct, tls_ca)


def start_servers(procs: Processes, work: Path, count: int) -> list[tuple[int, int]]:
    """`count` memcached servers, each filled with the rows' keys; returns (port, pid) each."""
    servers = []
    for i in range(count):
        port = free_port()
        argv = [peers.find("memcached", BIN, "run `make deps`"), "-l", "127.0.0.1", "-p", str(port), "-U", "0",
                "-m", "256", "-t", "2", "-c", str(peers.MAX_CONNECTIONS)]
        argv += ["-u", "root"] if os.geteuid() == 0 else []
        proc = procs.start(argv, work / f"memcached-{i}.log")
        wait_for_port(port, proc)
        populate(BIN, port, FILL)
        servers.append((port, proc.pid))
    return servers


def start_tls_servers(procs: Processes, work: Path, count: int) -> list[tuple[int, int, int]]:
    """`count` memcached speaking TLS (memcached -Z), each filled with the rows' keys through its
    plain port; returns (TLS port, pid, plain port) each. Makes the certificates first."""
    if count == 0:
        return []
    files = tlslib.make(work)
    servers = []
    for i in range(count):
        port, plain = free_port(), free_port()
        argv = [peers.find("memcached", BIN, "run `make deps`"), "-l", "127.0.0.1", "-p", str(port), "-U", "0",
                "-m", "256", "-t", "2", "-c", str(peers.MAX_CONNECTIONS)] + tlslib.memcached_options(files, plain)
        argv += ["-u", "root"] if os.geteuid() == 0 else []
        proc = procs.start(argv, work / f"memcached-tls-{i}.log")
        wait_for_port(port, proc)
        wait_for_port(plain, proc)
        populate(BIN, plain, FILL)
        servers.append((port, proc.pid, plain))
    return servers


class Servers:
    """The plain servers and the TLS ones, as each layout uses them."""

    def __init__(self, plain: list[tuple[int, int]], tls: list[tuple[int, int, int]]):
        self.plain, self.tls = plain, tls

    def backends(self, layout: str) -> list[tuple[int, int]]:
        """(port a proxy or the bench connects to, pid) of the layout's servers."""
        if layout in rowlib.TLS_LAYOUTS:
            return [(port, pid) for port, pid, _ in self.tls][: rowlib.SERVERS[layout]]
        return self.plain[: rowlib.SERVERS[layout]]

    def counter_ports(self, row: rowlib.Row) -> list[int]:
        """Where the row's servers' counters are read (plain text)."""
        if row.tls:
            return [plain for _, _, plain in self.tls][: row.servers]
        return [port for port, _ in self.plain][: row.servers]


def start_targets(procs: Processes, work: Path, servers: Servers, names: list[str], layouts: set[str],
                  baseline_bin: Path | None) -> dict[tuple[str, str], tuple[int, int] | peers.Cannot]:
    """Every target for every layout: (name, layout) -> (port, pid to measure) or Cannot."""
    started: dict[tuple[str, str], tuple[int, int] | peers.Cannot] = {}
    for layout in sorted(layouts):
        ports = [port for port, _ in servers.backends(layout)]
        spare = [port for port, _ in servers.plain if port not in ports]
        for name in names:
            if name == "memcached":
                started[(name, layout)] = servers.backends(layout)[0]  # direct to one server: the ceiling
                continue
            listen = free_port()
            argv = peers.command(name, layout, listen, ports, work, BIN, baseline_bin, spare)
            if isinstance(argv, peers.Cannot):
                started[(name, layout)] = argv
                continue
            proc = procs.start(argv, work / f"{name}-{layout}.log".replace("/", "-"))
            wait_for_port(listen, proc)
            started[(name, layout)] = (listen, proc.pid)
    return started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="length of one measurement")
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--quick", action="store_true", default=os.environ.get("BENCH_QUICK") == "1",
                        help="one repetition of 1 s (also BENCH_QUICK=1): for development, not for claims")
    parser.add_argument("--rows", default=None, help="comma-separated row names (default: all)")
    parser.add_argument("--measurement-cost", action="store_true", help="memrelay with and without --stats-dir")
    parser.add_argument("--routing-cost", action="store_true",
                        help="memrelay with no routes and with 100 routes over 3 pools (the row's keys in the "
                             "default pool), the same traffic")
    parser.add_argument("--targets", default=None, help="comma-separated targets, e.g. twemproxy,memrelay-evented/1")
    parser.add_argument("--baseline-bin", type=Path, default=None,
                        help="a directory with an earlier memrelay build: every memrelay target also runs from it, "
                             "named NAME@baseline, interleaved with this build (before/after in one run)")
    parser.add_argument("--profile", action="store_true",
                        help="instead of the comparison: one run per cell under perf stat, perf record and strace "
                             "(where the time goes, per request)")
    parser.add_argument("--json-out", type=Path, default=ROOT / "results" / "bench" / "proxies.json")
    args = parser.parse_args()
    if args.quick:
        args.seconds, args.repetitions = 1.0, 1
    try:
        rows = rowlib.select(args.rows)
    except ValueError as err:
        parser.error(str(err))

    if args.measurement_cost:
        names = ["memrelay-pool", "memrelay-pool+stats", "memrelay-evented", "memrelay-evented+stats"]
        rows = [r for r in rows if r.pipeline == 1 and r.clients == 16 and r.layout == "single"] if not args.rows else rows
        if args.json_out == parser.get_default("json_out"):
            args.json_out = ROOT / "results" / "bench" / "measurement-cost.json"
    elif args.routing_cost:
        names = ["memrelay-evented", "memrelay-evented+routes"]
        rows = [r for r in rows if r.pipeline == 1 and r.clients == 16 and r.layout == "single"] if not args.rows else rows
        if args.json_out == parser.get_default("json_out"):
            args.json_out = ROOT / "results" / "bench" / "routing-cost.json"
    else:
        names = DEFAULT_TARGETS
    if args.targets:
        names = args.targets.split(",")
    if args.profile and args.json_out == parser.get_default("json_out"):
        args.json_out = ROOT / "results" / "bench" / "profile.json"
    if args.baseline_bin:
        if why := beforeafter.problem(args.baseline_bin):
            parser.error(why)
        names = beforeafter.with_baselines(names)
    if "memcached-proxy" in names and peers.memcached_proxy_binary() is None:
        print(f"bench: memcached-proxy {peers.MEMCACHED_PROXY_ABSENT}",
              file=sys.stderr)

    procs = Processes()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    samples: dict[tuple[str, str], list[dict] | str] = {}
    started_at = time.monotonic()
    try:
        with tempfile.TemporaryDirectory(prefix="memrelay-bench-") as tmp:
            work = Path(tmp)
            # The routes' two extra pools need servers of their own (peers.ROUTES_POOLS).
            plain = max([r.servers for r in rows if not r.tls] + [3 if any("+routes" in n for n in names) else 0])
            servers = Servers(start_servers(procs, work, plain),
                              start_tls_servers(procs, work, max((r.servers for r in rows if r.tls), default=0)))
            targets = start_targets(procs, work, servers, names, {r.layout for r in rows}, args.baseline_bin)
            cells = [(row, name) for row in rows for name in names if not isinstance(targets[(name, row.layout)], peers.Cannot)]
            for row in rows:
                for name in names:
                    if isinstance(targets[(name, row.layout)], peers.Cannot):
                        samples[(row.name, name)] = targets[(name, row.layout)].reason
            if args.profile:
                return run_profiles(cells, targets, servers, args, work)
            total, done = args.repetitions * len(cells), 0
            for rep in range(args.repetitions):
                for row in rows:
                    order = [name for r, name in cells if r is row]
                    random.Random(rep * 1000 + rows.index(row)).shuffle(order)
                    for name in order:
                        done += 1
                        elapsed = time.monotonic() - started_at
                        left = elapsed / done * (total - done + 1) if done > 1 else total * (args.seconds + 1)
                        print(f"bench: {done}/{total} rep {rep + 1} {row.name:<27} {name:<24} ~{left:.0f} s left",
                              file=sys.stderr, flush=True)
                        port, pid = targets[(name, row.layout)]
                        ports = servers.counter_ports(row)
                        result = measure(pid, port, ports, row, args.seconds, work / "bench.json", name == "memcached")
                        result["rep"] = rep
                        for problem in result["work_problems"]:
                            print(f"bench: WORK CHECK: {row.name} / {name}: {problem}", file=sys.stderr)
                        samples.setdefault((row.name, name), []).append(result)
    finally:
        procs.stop_all()

    table = summarize(samples, rows, names)
    minutes = (time.monotonic() - started_at) / 60
    print_table(table, names, args, minutes)
    print_verdicts(table)
    print_before_after(table, names)
    print_tls_cost(table, rows, names)
    args.json_out.parent.mkdir(parents=True, exist_ok=True)
    args.json_out.write_text(json.dumps({"seconds": args.seconds, "repetitions": args.repetitions,
                                         "load_average": os.getloadavg(), "cores": os.cpu_count(),
                                         "rows": table}, indent=2))
    print(f"\nwritten: {args.json_out}")
    failed = [(e["row"], n) for e in table for n, t in e["targets"].items() if t.get("work_problems")]
    if failed:
        print(f"bench: error: the servers' counters say these cells did not do the row's job: {failed}", file=sys.stderr)
        return 1
    return 0


def run_profiles(cells, targets, servers, args, work: Path) -> int:
    """Each cell once plainly, then under each profiler; prints where the time goes per request."""
    results = []
    for row, name in cells:
        port, pid = targets[(name, row.layout)]
        ports = servers.counter_ports(row)
        print(f"bench: profiling {row.name} / {name}", file=sys.stderr, flush=True)

        def once() -> int:
            return measure(pid, port, ports, row, args.seconds, work / "bench.json", name == "memcached")["requests"]

        plain = measure(pid, port, ports, row, args.seconds, work / "bench.json", name == "memcached")
        results.append({"row": row.name, "target": name, "plain": plain,
                        "perf_stat": profile.perf_stat(pid, once, work),
                        "perf_record": profile.perf_record(pid, once, work),
                        "strace": profile.strace_counts(pid, once, work)})
    print_profiles(results)
    args.json_out.parent.mkdir(parents=True, exist_ok=True)
    args.json_out.write_text(json.dumps(results, indent=2))
    print(f"\nwritten: {args.json_out}")
    return 0


def print_profiles(results) -> None:
    print("\nper request answered: CPU (user/system from /proc in a plain run), context switches (perf stat), "
          "system calls (strace -c -f), kernel share of CPU samples (perf record -e cpu-clock)\n")
    header = (f"{'row':<27} {'target':<22} {'ops/s':>8} {'cpu us':>7} {'user':>6} {'sys':>6} {'ctxsw':>6} "
              f"{'calls':>6} {'kernel':>7}  top calls per request")
    print(header)
    print("-" * len(header))
    for r in results:
        p, st, rec, tr = r["plain"], r["perf_stat"], r["perf_record"], r["strace"]
        top = ", ".join(f"{n} {c:.2f}" for n, c in list(tr["by_call"].items())[:4])
        print(f"{r['row']:<27} {r['target']:<22} {fmt(p['ops_per_sec']):>8} {fmt(p['cpu_us_per_request'], 1):>7} "
              f"{fmt(p['user_us_per_request'], 1):>6} {fmt(p['system_us_per_request'], 1):>6} "
              f"{st['context_switches_per_request']:>6.2f} {tr['syscalls_per_request']:>6.2f} "
              f"{rec['kernel_share']:>7.0%}  {top}")
    print("\nhottest symbols (share of the target's CPU samples)\n")
    for r in results:
        print(f"{r['row']} / {r['target']}:")
        for symbol, share in r["perf_record"]["top_symbols"][:8]:
            print(f"  {share:>6.1%}  {symbol[:110]}")
        print()


def fmt(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def print_table(table, names, args, minutes: float) -> None:
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\nmedians of {args.repetitions} interleaved runs of {args.seconds:g} s ({minutes:.1f} min in all; "
          f"{os.cpu_count()} cores, load average now {load}); x = throughput / the row's best peer "
          f"(without peers: / {names[0]}); "
          f"cpu = the target process's user + system time per request (memcached: the server's own)\n")
    header = (f"{'row':<27} {'target':<24} {'ops/s':>9} {'x':>5} {'p50 us':>7} {'p99 us':>7} "
              f"{'cpu us/req':>10} {'sys %':>6}")
    print(header)
    print("-" * len(header))
    for entry in table:
        # Ratios against the best peer, or without peers (--measurement-cost) the first target.
        reference = entry["verdict"].get("peer") or names[0]
        peer_ops = (entry["targets"].get(reference) or {}).get("ops_per_sec")
        for name in names:
            t = entry["targets"].get(name)
            if t is None:
                continue
            if "cannot" in t:
                print(f"{entry['row']:<27} {name:<24} {t['cannot']}")
                continue
            ratio = f"{t['ops_per_sec'] / peer_ops:.2f}" if peer_ops else "-"
            cpu = t["cpu_us_per_request"]
            sys_share = f"{t['system_us_per_request'] / cpu:.0%}" if cpu else "-"
            flag = "  WORK CHECK FAILED" if t["work_problems"] else ""
            print(f"{entry['row']:<27} {name:<24} {fmt(t['ops_per_sec']):>9} {ratio:>5} {fmt(t['p50_us']):>7} "
                  f"{fmt(t['p99_us']):>7} {fmt(cpu, 1):>10} {sys_share:>6}{flag}")
        print()


def print_verdicts(table) -> None:
    """memrelay's better setting against the best peer, row by row, against the issue's bar."""
    if not any(entry["verdict"].get("peer") or any("cannot" in t for t in entry["targets"].values())
               for entry in table):
        return  # no peer among the targets (e.g. --measurement-cost)
    print(f"memrelay's best setting against the best peer (bar: throughput >= {THROUGHPUT_BAR}x, p99 <= 1x, "
          f"cpu/req <= {CPU_BAR}x;\nat a fixed rate (open loop) throughput only has to keep up)\n")
    header = f"{'row':<27} {'memrelay':<20} {'best peer':<16} {'tput x':>6} {'p99 x':>6} {'cpu x':>6} {'of direct':>9}  bar"
    print(header)
    print("-" * len(header))
    for entry in table:
        v = entry["verdict"]
        if not v.get("memrelay"):
            continue
        peer = v.get("peer") or "(none can)"
        bar = ("met" if v["meets_bar"] else "not met") if "meets_bar" in v else "-"
        of_direct = f"{v['of_direct']:.0%}" if v.get("of_direct") else "-"
        print(f"{entry['row']:<27} {v['memrelay']:<20} {peer:<16} {fmt(v.get('throughput_ratio'), 2):>6} "
              f"{fmt(v.get('p99_ratio'), 2):>6} {fmt(v.get('cpu_ratio'), 2):>6} {of_direct:>9}  {bar}")
    print()


def print_before_after(table, names) -> None:
    """This build against the baseline build, per row: throughput and CPU per request ratios."""
    if not beforeafter.paired(names):
        return
    print("this build / baseline build (medians of the per-repetition ratios): throughput ratio, "
          "CPU-per-request ratio\n")
    for entry in table:
        for name, new, old in beforeafter.pairs(entry["targets"], names):
            tput = beforeafter.ratio(new, old, "ops_per_sec")
            cpu = beforeafter.ratio(new, old, "cpu_us_per_request")
            print(f"{entry['row']:<27} {name:<24} throughput x{fmt(tput, 3)}   cpu/req x{fmt(cpu, 3)}")
    print()


def print_tls_cost(table, rows, names) -> None:
    """What TLS costs each target per request: a TLS row against its plain reference row."""
    by_name = {entry["row"]: entry for entry in table}
    lines = []
    for row in rows:
        tls, plain = by_name.get(row.name), by_name.get(row.reference or "")
        if not tls or not plain:
            continue
        for name in names:
            a, b = tls["targets"].get(name), plain["targets"].get(name)
            if not a or not b or "cannot" in a or "cannot" in b:
                continue
            cpu_tls, cpu_plain = a["cpu_us_per_request"], b["cpu_us_per_request"]
            ratio = f"{cpu_tls / cpu_plain:.2f}" if cpu_plain else "-"
            tput = f"{a['ops_per_sec'] / b['ops_per_sec']:.2f}" if b["ops_per_sec"] else "-"
            lines.append(f"{row.name:<27} {name:<24} {fmt(cpu_tls, 1):>10} {fmt(cpu_plain, 1):>10} "
                         f"{fmt(cpu_tls - cpu_plain, 1):>10} {ratio:>7} {tput:>7}")
    if not lines:
        return
    print("what TLS costs: the TLS row against its plain reference row, same target (cpu = the target process's "
          "user + system time per request)\n")
    header = f"{'row':<27} {'target':<24} {'cpu TLS':>10} {'cpu plain':>10} {'TLS extra':>10} {'cpu x':>7} {'tput x':>7}"
    print(header)
    print("-" * len(header))
    print("\n".join(lines))
    print()


if __name__ == "__main__":
    sys.exit(main())
