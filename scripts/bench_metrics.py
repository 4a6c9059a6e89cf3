#!/usr/bin/env python3
"""The metrics endpoint beside 1,000 hostile connections: how long does an honest scrape take?

One memcached, memrelay (evented, 1 thread) with `--metrics-listen` (plain HTTP, or HTTPS with
`--https`: certificates made here with the `openssl` command) and a 1 s connection deadline
(`--metrics-timeout-ms 1000`). A scraper asks `GET /metrics` back to back, a new connection each
time, as Prometheus does, and times each from connect to the last byte of the answer; memrelay-bench
drives 16 memcached clients meanwhile (their p99 shows what the endpoint's trouble costs them). In
every other run an attacker process holds 1,000 connections to the metrics port: half never send a
byte, half dribble a request head (over HTTPS, a ClientHello) a byte a second. memrelay holds at
most 64 at once and closes the rest, and each at the deadline; the attacker opens a new one at
once, so a thousand are always knocking.

Runs alternate (quiet, attacked) so the machine's noise hits both alike; the table shows the
medians of the scrapes' p99, the scrapes that failed, and the clients' p99. Everything started
here is stopped at the end, also on error or Ctrl-C.

    lab/.venv/bin/python scripts/bench_metrics.py [--repetitions 5] [--seconds 3] [--https]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import ssl
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import hostile, peers, tls as tlslib  # noqa: E402
from memrelay_lab.plumbing.processes import Processes, free_port, wait_for_port  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(os.environ.get("MEMRELAY_BIN_DIR", ROOT / "target" / "release"))
HOSTILE = 1000
DEADLINE_MS = 1000

def scrape(port: int, context: ssl.SSLContext | None, timeout: float = 5.0) -> float | None:
    """One `GET /metrics` on a new connection: seconds from connect to the whole answer, or None
    when it was not answered 200 with the whole exposition."""
    started = time.perf_counter()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as raw:
            sock = context.wrap_socket(raw, server_hostname="localhost") if context else raw
            sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n")
            answer = bytearray()
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                answer += chunk
    except (OSError, ssl.SSLError):
        return None
    if not answer.startswith(b"HTTP/1.1 200") or not answer.rstrip().endswith(b"# EOF"):
        return None
    return time.perf_counter() - started


def scrape_for(port: int, context: ssl.SSLContext | None, seconds: float) -> dict:
    """Scrapes back to back for `seconds`: the p99 (µs) of those answered, and how many failed."""
    times, failed = [], 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        took = scrape(port, context)
        if took is None:
            failed += 1
        else:
            times.append(took * 1e6)
    times.sort()
    p99 = times[min(len(times) - 1, int(0.99 * len(times)))] if times else float("nan")
    return {"scrape_p99_us": p99, "scrape_p50_us": times[len(times) // 2] if times else float("nan"),
            "scrapes": len(times), "failed": failed}


def one_run(plain: int, metrics: int, context: ssl.SSLContext | None, seconds: float, out: Path) -> dict:
    """Scrapes and memcached clients side by side for `seconds`."""
    result: dict = {}
    def load_run() -> None:
        clients = hostile.run_load(BIN, plain, seconds, out)
        result.update(client_p99_us=clients["p99_us"], throughput=clients["throughput"])

    load = threading.Thread(target=load_run)
    load.start()
    result.update(scrape_for(metrics, context, seconds))
    load.join()
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--https", action="store_true", help="/metrics over HTTPS")
    parser.add_argument("--json-out", type=Path, default=None)
    args = parser.parse_args()
    if os.environ.get("BENCH_QUICK"):
        args.repetitions, args.seconds = 2, 1.0
    scheme = "https" if args.https else "http"
    json_out = args.json_out or ROOT / "results" / "bench" / f"metrics-{scheme}.json"
    procs = Processes()
    try:
        with tempfile.TemporaryDirectory(prefix="memrelay-metrics-") as tmp:
            work = Path(tmp)
            server = free_port()
            argv = [peers.find("memcached", BIN, "install memcached"), "-l", "127.0.0.1", "-p", str(server), "-U", "0"]
            argv += ["-u", "root"] if os.geteuid() == 0 else []
            wait_for_port(server, procs.start(argv, work / "memcached.log"))
            plain, metrics = free_port(), free_port()
            argv = [peers.find("memrelay", BIN, "run `make build`"), "--listen", f"127.0.0.1:{plain}",
                    "--server", f"127.0.0.1:{server}", "--threads", "1",
                    "--metrics-listen", f"127.0.0.1:{metrics}", "--metrics-timeout-ms", str(DEADLINE_MS)]
            context = None
            if args.https:
                cert, key = tlslib.self_signed(work)
                argv += ["--metrics-tls-cert", str(cert), "--metrics-tls-key", str(key)]
                context = ssl.create_default_context(cafile=str(cert))
            relay = procs.start(argv, work / "memrelay.log")
            wait_for_port(plain, relay)
            wait_for_port(metrics, relay)

            def check() -> None:
                if relay.poll() is not None:
                    raise RuntimeError(f"memrelay exited ({relay.returncode}): {(work / 'memrelay.log').read_text()}")

            runs = hostile.alternate(
                procs, work, args.repetitions, [str(metrics), str(HOSTILE), "tls" if args.https else "http"],
                lambda kind: f"{args.seconds:g} s of scrapes ({scheme}) and 16 clients"
                + (f" beside {HOSTILE:,} hostile connections" if kind == "attacked" else ""),
                lambda: one_run(plain, metrics, context, args.seconds, work / "bench.json"), check)
    finally:
        procs.stop_all()
    summary = {kind: {key: statistics.median(r[key] for r in rs)
                      for key in ("scrape_p99_us", "scrape_p50_us", "client_p99_us", "throughput")}
               | {"scrapes": sum(r["scrapes"] for r in rs), "failed": sum(r["failed"] for r in rs)}
               for kind, rs in runs.items()}
    ratio = summary["attacked"]["scrape_p99_us"] / summary["quiet"]["scrape_p99_us"]
    closed = sum(r.get("hostile_closed", 0) for r in runs["attacked"])
    print(f"\n/metrics over {scheme.upper()}: medians of {args.repetitions} × {args.seconds:g} s, "
          f"scrapes back to back beside 16 memcached clients")
    print(f"{'':<40}{'scrape p50':>12}{'scrape p99':>12}{'failed':>12}{'client p99':>12}")
    for kind, label in (("quiet", "alone"), ("attacked", f"beside {HOSTILE:,} hostile connections")):
        s = summary[kind]
        failed = f"{s['failed']}/{s['scrapes'] + s['failed']}"
        print(f"{label:<40}{s['scrape_p50_us']:>9,.0f} µs{s['scrape_p99_us']:>9,.0f} µs{failed:>12}"
              f"{s['client_p99_us']:>9,.0f} µs")
    print(f"scrape p99 ratio {ratio:.2f}×; hostile connections memrelay closed (a new one took each one's place): "
          f"{closed:,}")
    json_out.parent.mkdir(parents=True, exist_ok=True)
    json_out.write_text(json.dumps({"scheme": scheme, "runs": runs, "summary": summary, "scrape_p99_ratio": ratio,
                                    "hostile_closed": closed}, indent=2))
    print(f"written: {json_out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
