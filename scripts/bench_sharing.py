#!/usr/bin/env python3
"""Honest clients beside hostile clients that share the proxy's server connections.

One memcached (`-I 2m`) holds a 1 MiB value and the honest clients' keys; each target (a proxy)
sits in front of it, configured so that every client's requests go over the same few server
connections: memrelay evented with one event thread (one server connection for everyone: the
sharpest case) and with one per core (a connection per thread), memrelay's pool engine (16
workers, a server connection each), twemproxy (`server_connections: 1`) and memcached's proxy
(its cached build or MEMCACHED_PROXY; a backend connection per worker thread, `-t` = cores).

The hostile clients are a separate process (scripts/benchlib/hostile.py's PIPELINER, so its CPU
is its own): N connections (rows for N = 1, 8, 64) that each pipeline 300 `get`s of the 1 MiB
value (2.7 KB of requests, 300 MiB of replies) and then never read the replies, or read them
slowly (1 KB every 100 ms); a connection the target closes is replaced by a new one. The honest
load is memrelay-bench: 16 closed-loop clients (1 set in 10, 32-byte values) against the same
target, measured alone and beside the attacker, alternating so that the machine's noise hits
both alike; every run starts a fresh target. Reported per row and target: the honest clients'
throughput and p99 alone and beside (medians) and their ratios, the target's peak RSS during the
attack (VmHWM of the fresh process), and how many hostile connections the target closed per run.

So that the machine is never at risk, the attacker stops (closes every connection) once the
target's RSS passes --rss-limit (4 GiB): such a run's peak says "≥ limit" and the time it took.
A run where more than 1% of the honest requests went unanswered (stuck behind the attacker until
the end of the run and memrelay-bench's 2 s grace) has no p99: it says "stalled".

    lab/.venv/bin/python scripts/bench_sharing.py                 # every row and target, medians of 3 × 2 s (~9 min)
    lab/.venv/bin/python scripts/bench_sharing.py --quick         # one 0.5 s run per cell (also BENCH_QUICK=1), ~1-2 min
    lab/.venv/bin/python scripts/bench_sharing.py --targets memrelay-evented/1 --connections 8 --modes never
    lab/.venv/bin/python scripts/bench_sharing.py --baseline-bin DIR   # also DIR/memrelay (an earlier build), interleaved

Results: a table on stdout and JSON in results/bench/sharing/sharing.json (--out DIR). Every
process started here is stopped at the end, also on error or Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import beforeafter, bigreplies, hostile, human, peers, rss  # noqa: E402
from benchlib.measure import populate  # noqa: E402
from memrelay_lab.plumbing.processes import Processes, free_port, wait_for_port  # noqa: E402
from benchlib.rows import Row  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(os.environ.get("MEMRELAY_BIN_DIR", ROOT / "target" / "release"))
DEFAULT_TARGETS = ["memrelay-evented/1", f"memrelay-evented/{peers.CORES}", "memrelay-pool", "twemproxy",
                   "memcached-proxy"]
CONNECTIONS = (1, 8, 64)
MODES = {"never": "not reading", "slow": "reading 1 KB/100 ms"}
KEY, VALUE, GETS = "big", 1 << 20, 300  # "get big\r\n" × 300: 2,700 bytes of requests, 300 MiB of replies
HONEST_CLIENTS = 16
HONEST = Row("honest", "1:9", HONEST_CLIENTS, data_size=32)  # what hostile.run_load asks for
RSS_LIMIT = 4 << 30
GRACE_S = 2.0  # memrelay-bench's --grace: how long an unanswered request waited at least
STALLED_SHARE = 0.01  # more unanswered honest requests than this: the run has no p99


@dataclass(frozen=True)
class Attack:
    connections: int
    mode: str  # "never" or "slow"

    @property
    def label(self) -> str:
        return f"{self.connections} {MODES[self.mode]}"


def attacks(connections: list[int], modes: list[str]) -> list[Attack]:
    return [Attack(n, mode) for mode in modes for n in connections]


def memcached_argv(port: int) -> list[str]:
    argv = [peers.find("memcached", BIN, "run `make deps`"), "-l", "127.0.0.1", "-p", str(port), "-U", "0",
            "-m", "256", "-I", "2m", "-t", "2", "-c", "4096"]
    return argv + (["-u", "root"] if os.geteuid() == 0 else [])


def target_argv(name: str, listen: int, backend: int, work: Path, baseline_bin: Path | None = None
                ) -> list[str] | peers.Cannot:
    """The target in front of `backend`, as scripts/bench_proxies.py starts it (peers.command;
    NAME@baseline: memrelay from `baseline_bin`): memrelay with its defaults (--max-value-size
    1 MiB takes the value), memcached's proxy with items up to 2 MiB like the server."""
    argv = peers.command(name, "single", listen, [backend], work, BIN, baseline_bin)
    if not isinstance(argv, peers.Cannot) and name == "memcached-proxy":
        argv = peers.with_option(argv, "-I", "2m")
    return argv


def effective_p99(run: dict) -> float:
    """The honest clients' p99 in µs, or infinity where too many of their requests went unanswered."""
    sent = run["answered"] + run["unanswered"]
    if run["p99_us"] is None or not sent or run["unanswered"] > STALLED_SHARE * sent:
        return math.inf
    return float(run["p99_us"])


def summarize(runs: dict[str, list[dict]], rss_limit: int) -> dict:
    """Medians of a cell's runs (quiet and attacked) and the ratios attacked / quiet."""
    out: dict = {}
    for kind, got in runs.items():
        p99 = statistics.median(effective_p99(r) for r in got)
        out[kind] = {"throughput": statistics.median(r["throughput"] for r in got),
                     "p99_us": None if math.isinf(p99) else p99, "stalled": math.isinf(p99),
                     "unanswered": sum(r["unanswered"] for r in got),
                     "peak_rss_bytes": statistics.median(r["peak_rss_bytes"] for r in got)}
    attacked, quiet = out["attacked"], out["quiet"]
    attacked["hostile_closed"] = statistics.median(r.get("hostile_closed", 0) for r in runs["attacked"])
    capped = [r["capped_after_s"] for r in runs["attacked"] if "capped_after_s" in r]
    attacked["capped_runs"] = len(capped)
    attacked["capped_after_s"] = statistics.median(capped) if capped else None
    attacked["rss_limit_bytes"] = rss_limit
    out["throughput_ratio"] = attacked["throughput"] / quiet["throughput"] if quiet["throughput"] else None
    out["p99_ratio"] = (attacked["p99_us"] / quiet["p99_us"]
                        if attacked["p99_us"] is not None and quiet["p99_us"] else None)
    return out


def measure_cell(procs: Processes, work: Path, backend: int, name: str, attack: Attack, repetitions: int,
                 seconds: float, rss_limit: int, baseline_bin: Path | None) -> dict:
    """One target against one attack: a fresh target per run, quiet and attacked alternating."""
    current: dict = {}

    def fresh(kind: str) -> None:
        stop_target()
        listen = free_port()
        argv = target_argv(name, listen, backend, work, baseline_bin)
        assert not isinstance(argv, peers.Cannot)
        proc = procs.start(argv, work / f"{name.replace('/', '-')}.log")
        wait_for_port(listen, proc)
        current.update(port=listen, proc=proc)

    def stop_target() -> None:
        if current.get("proc") is not None:
            current["proc"].kill()  # at once: a proxy's graceful shutdown would wait for the attack's replies
            procs.stop(current.pop("proc"))

    def run() -> dict:
        result = hostile.run_load(BIN, current["port"], seconds, work / "bench.json", clients=HONEST_CLIENTS)
        pid = current["proc"].pid
        result |= {"peak_rss_bytes": rss.hwm(pid), "rss_end_bytes": rss.rss(pid)}
        return result

    def check() -> None:
        proc = current["proc"]
        if proc.poll() is not None:
            log = (work / f"{name.replace('/', '-')}.log").read_text()[-500:]
            raise RuntimeError(f"{name} exited with status {proc.returncode}: {log}")

    def attack_argv() -> list[str]:
        return [str(current["port"]), str(attack.connections), attack.mode, KEY, str(GETS),
                str(current["proc"].pid), str(rss_limit)]

    try:
        runs = hostile.alternate(
            procs, work, repetitions, attack_argv,
            lambda kind: f"{name}: {seconds:g} s of {HONEST_CLIENTS} clients"
            + (f" beside {attack.label}" if kind == "attacked" else ""),
            run, check, script=hostile.PIPELINER, before=fresh)
    finally:
        stop_target()
    return {"summary": summarize(runs, rss_limit), "runs": runs}


def run_all(names: list[str], chosen: list[Attack], repetitions: int, seconds: float, rss_limit: int,
            baseline_bin: Path | None = None) -> list[dict]:
    procs = Processes()
    rows = [{"row": a.label, "connections": a.connections, "mode": a.mode, "targets": {}} for a in chosen]
    try:
        with tempfile.TemporaryDirectory(prefix="memrelay-sharing-") as tmp:
            work = Path(tmp)
            backend = free_port()
            wait_for_port(backend, procs.start(memcached_argv(backend), work / "memcached.log"))
            bigreplies.store(backend, KEY, VALUE)
            populate(BIN, backend, HONEST)
            for attack, row in zip(chosen, rows):
                for name in names:
                    argv = target_argv(name, free_port(), backend, work, baseline_bin)
                    if isinstance(argv, peers.Cannot):
                        row["targets"][name] = {"cannot": argv.reason}
                        continue
                    try:
                        row["targets"][name] = measure_cell(procs, work, backend, name, attack, repetitions,
                                                            seconds, rss_limit, baseline_bin)
                    except (RuntimeError, OSError) as err:
                        print(f"bench: {name} / {attack.label}: {err}", file=sys.stderr, flush=True)
                        row["targets"][name] = {"cannot": f"failed: {err}"}
    finally:
        procs.stop_all()
    return rows


def p99_text(cell: dict) -> str:
    return "stalled" if cell["stalled"] else human.micros(cell["p99_us"])


def ratio_text(value: float | None, stalled: bool = False) -> str:
    """A ratio as people read it: two decimals below 10, fewer above, "<0.01" for next to nothing."""
    if stalled:
        return "stalled"
    if value is None:
        return "-"
    if value == 0:
        return "0"
    if value < 0.01:
        return "<0.01"
    return f"{value:,.{2 if value < 10 else 1 if value < 100 else 0}f}"


def peak_text(attacked: dict) -> str:
    text = human.size(attacked["peak_rss_bytes"])
    if attacked["capped_runs"]:
        text = f"≥{human.size(attacked['rss_limit_bytes'])} (capped {attacked['capped_runs']}×, "\
               f"{attacked['capped_after_s']:.1f} s)"
    return text


HEADER = (f"{'hostile clients':<24} {'target':<27} {'req/s alone':>11} {'beside':>9} {'×':>6} "
          f"{'p99 alone':>10} {'beside':>10} {'×':>8} {'RSS alone':>10}  {'peak RSS beside':<30} {'closed':>7}")


def table_lines(rows: list[dict], names: list[str]) -> list[str]:
    """The table for people: one line per row and target, numbers with separators and units."""
    lines = [HEADER, "-" * len(HEADER)]
    for row in rows:
        for name in names:
            cell = row["targets"].get(name)
            if cell is None:
                continue
            if "cannot" in cell:
                lines.append(f"{row['row']:<24} {name:<27} {cell['cannot']}")
                continue
            s = cell["summary"]
            quiet, attacked = s["quiet"], s["attacked"]
            lines.append(
                f"{row['row']:<24} {name:<27} {human.number(quiet['throughput']):>11} "
                f"{human.number(attacked['throughput']):>9} {ratio_text(s['throughput_ratio']):>6} "
                f"{p99_text(quiet):>10} {p99_text(attacked):>10} "
                f"{ratio_text(s['p99_ratio'], attacked['stalled'] or quiet['stalled']):>8} "
                f"{human.size(quiet['peak_rss_bytes']):>10}  {peak_text(attacked):<30} "
                f"{human.number(attacked['hostile_closed']):>7}")
        lines.append("")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog="\n\n".join(__doc__.split("\n\n")[1:]),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repetitions", type=int, default=3, help="runs alone and beside, each (default 3)")
    parser.add_argument("--seconds", type=float, default=2.0, help="length of one honest run (default 2)")
    parser.add_argument("--quick", action="store_true", default=os.environ.get("BENCH_QUICK") == "1",
                        help="one run of 0.5 s per cell (also BENCH_QUICK=1): checks, not claims")
    parser.add_argument("--targets", default=None, help=f"comma-separated (default {','.join(DEFAULT_TARGETS)})")
    parser.add_argument("--connections", default=",".join(map(str, CONNECTIONS)),
                        help="hostile connections per row, comma-separated (default 1,8,64)")
    parser.add_argument("--modes", default=",".join(MODES), help="never (never read), slow (1 KB every 100 ms)")
    parser.add_argument("--rss-limit", type=int, default=RSS_LIMIT,
                        help="stop the attack once the target's RSS passes this many bytes (default 4 GiB)")
    parser.add_argument("--baseline-bin", type=Path, default=None,
                        help="a directory with an earlier memrelay build: every memrelay target also runs from it, "
                             "named NAME@baseline, interleaved with this build")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "bench" / "sharing", help="folder of the JSON")
    args = parser.parse_args()
    if args.quick:
        args.repetitions, args.seconds = 1, 0.5
    names = args.targets.split(",") if args.targets else DEFAULT_TARGETS
    modes = args.modes.split(",")
    if unknown := [m for m in modes if m not in MODES]:
        parser.error(f"unknown mode(s) {unknown}; modes are {', '.join(MODES)}")
    if args.baseline_bin:
        if why := beforeafter.problem(args.baseline_bin):
            parser.error(why)
        names = beforeafter.with_baselines(names)
    chosen = attacks([int(n) for n in args.connections.split(",")], modes)
    if "memcached-proxy" in names and peers.memcached_proxy_binary() is None:
        print(f"bench: memcached-proxy {peers.MEMCACHED_PROXY_ABSENT}",
              file=sys.stderr)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    started = time.monotonic()
    rows = run_all(names, chosen, args.repetitions, args.seconds, args.rss_limit, args.baseline_bin)
    minutes = (time.monotonic() - started) / 60
    load = os.getloadavg()
    print(f"\nHonest clients beside hostile clients sharing the proxy's server connections: "
          f"{HONEST_CLIENTS} clients (1 set in 10, 32 B), medians of {args.repetitions} × {args.seconds:g} s "
          f"alone and beside, a fresh target each run; {minutes:.1f} min, load average now "
          f"{', '.join(f'{x:.1f}' for x in load)}.\nHostile: N connections each pipelining {GETS} gets of a "
          f"{human.size(VALUE)} value; × = beside / alone; peak RSS: the target's VmHWM (the attack stops past "
          f"{human.size(args.rss_limit)}); closed: hostile connections the target closed per run.\n")
    print("\n".join(table_lines(rows, names)))
    result = {"targets": names, "baseline_bin": str(args.baseline_bin) if args.baseline_bin else None,
              "memrelay_bin": str(BIN), "repetitions": args.repetitions, "seconds": args.seconds, "quick": args.quick,
              "honest_clients": HONEST_CLIENTS, "gets_per_connection": GETS, "value_bytes": VALUE,
              "rss_limit_bytes": args.rss_limit, "minutes": minutes, "load_average": load, "rows": rows}
    args.out.mkdir(parents=True, exist_ok=True)
    json_out = args.out / "sharing.json"
    json_out.write_text(json.dumps(result, indent=2))
    print(f"written: {json_out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
