#!/usr/bin/env python3
"""Slow and half-open TLS handshakes against memrelay's TLS listener: do they delay other clients?

One memcached, memrelay (evented, a plain and a TLS listener, certificates made here with the
`openssl` command). memrelay-bench drives 16 closed-loop clients (1 write in 10) at the plain
listener; in every other run an attacker process holds 1,000 connections to the TLS listener
that never finish their handshake: half never send a byte, half send a ClientHello's first
bytes one a second. memrelay closes each at its handshake time limit (1 s here, so the attacker
reconnects a thousand a second: accepts, rustls state and closes are all exercised) and the
attacker opens a new one at once, so a thousand are always waiting.

Runs alternate (quiet, attacked) so the machine's noise hits both alike; the table shows the
medians of the clients' p99 and throughput, and the ratio the issue asks about (attacked p99 /
quiet p99 <= 2). Everything started here is stopped at the end, also on error or Ctrl-C.

    lab/.venv/bin/python scripts/bench_handshakes.py [--repetitions 5] [--seconds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import hostile, peers, tls as tlslib, workcheck  # noqa: E402
from memrelay_lab.plumbing.processes import Processes, free_port, wait_for_port  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(os.environ.get("MEMRELAY_BIN_DIR", ROOT / "target" / "release"))
STALLED = 1000
HANDSHAKE_LIMIT_MS = 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--json-out", type=Path, default=ROOT / "results" / "bench" / "handshakes.json")
    args = parser.parse_args()
    if os.environ.get("BENCH_QUICK"):
        args.repetitions, args.seconds = 2, 1.0
    procs = Processes()
    try:
        with tempfile.TemporaryDirectory(prefix="memrelay-handshakes-") as tmp:
            work = Path(tmp)
            cert, key = tlslib.self_signed(work)
            server = free_port()
            argv = [peers.find("memcached", BIN, "install memcached"), "-l", "127.0.0.1", "-p", str(server), "-U", "0"]
            argv += ["-u", "root"] if os.geteuid() == 0 else []
            wait_for_port(server, procs.start(argv, work / "memcached.log"))
            plain, tls = free_port(), free_port()
            argv = [peers.find("memrelay", BIN, "run `make build`"), "--listen", f"127.0.0.1:{plain}",
                    "--server", f"127.0.0.1:{server}", "--threads", "1", "--max-clients", str(STALLED + 200),
                    "--tls-listen", f"127.0.0.1:{tls}", "--tls-cert", str(cert), "--tls-key", str(key),
                    "--tls-handshake-timeout-ms", str(HANDSHAKE_LIMIT_MS)]
            wait_for_port(plain, procs.start(argv, work / "memrelay.log"))
            runs = hostile.alternate(
                procs, work, args.repetitions, [str(tls), str(STALLED), "tls"],
                lambda kind: f"{args.seconds:g} s of 16 clients"
                + (f" beside {STALLED:,} stalled handshakes" if kind == "attacked" else ""),
                lambda: hostile.run_load(BIN, plain, args.seconds, work / "bench.json"))
            denied = int(workcheck.stats(plain)["access_denied_tls_handshake"])
    finally:
        procs.stop_all()
    summary = {kind: {"p99_us": statistics.median(r["p99_us"] for r in rs),
                      "throughput": statistics.median(r["throughput"] for r in rs)} for kind, rs in runs.items()}
    ratio = summary["attacked"]["p99_us"] / summary["quiet"]["p99_us"]
    print(f"\nTLS handshakes: medians of {args.repetitions} × {args.seconds:g} s, 16 clients on the plain listener")
    print(f"{'':<44}{'p99':>10}{'req/s':>12}")
    for kind, label in (("quiet", "alone"), ("attacked", f"beside {STALLED:,} stalled TLS handshakes")):
        print(f"{label:<44}{summary[kind]['p99_us']:>8,.0f} µs{summary[kind]['throughput']:>12,.0f}")
    verdict = "within" if ratio <= 2 else "OVER"
    print(f"p99 ratio {ratio:.2f}× ({verdict} the 2× bound); handshakes closed at the time limit: {denied:,}")
    args.json_out.parent.mkdir(parents=True, exist_ok=True)
    args.json_out.write_text(json.dumps({"runs": runs, "summary": summary, "p99_ratio": ratio,
                                         "handshakes_closed": denied}, indent=2))
    print(f"written: {args.json_out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
