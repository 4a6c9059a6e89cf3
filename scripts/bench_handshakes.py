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

    python3 scripts/bench_handshakes.py [--repetitions 5] [--seconds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import peers, workcheck  # noqa: E402
from benchlib.processes import Processes, free_port, wait_for_port  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(os.environ.get("MEMRELAY_BIN_DIR", ROOT / "target" / "release"))
STALLED = 1000
HANDSHAKE_LIMIT_MS = 1000

# The attacker: a separate process, so its own CPU shows up as what it is.
ATTACKER = r"""
import resource, selectors, socket, sys, time
port, count = int(sys.argv[1]), int(sys.argv[2])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, count + 100)), hard))
# The first bytes of a TLS ClientHello record (handshake, TLS 1.0 record, 512 bytes long).
hello = bytes([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03]) + bytes(32)
sel = selectors.DefaultSelector()
conns = {}  # socket -> bytes sent so far (None: silent)
def open_one(i):
    s = socket.socket()
    s.setblocking(False)
    try:
        s.connect(("127.0.0.1", port))
    except BlockingIOError:
        pass
    conns[s] = 0 if i % 2 else None
    sel.register(s, selectors.EVENT_READ)
for i in range(count):
    open_one(i)
print("ready", flush=True)
reopened, next_drip = 0, time.monotonic() + 1
while True:
    for key, _ in sel.select(timeout=0.1):
        s = key.fileobj
        try:
            data = s.recv(4096)
        except OSError:
            data = b""
        if not data:  # memrelay closed it: a new one takes its place
            sel.unregister(s)
            slow = conns.pop(s) is not None
            s.close()
            open_one(1 if slow else 0)
            reopened += 1
    if time.monotonic() >= next_drip:
        next_drip += 1
        for s, sent in list(conns.items()):
            if sent is not None and sent < len(hello):
                try:
                    s.send(hello[sent:sent + 1])
                    conns[s] = sent + 1
                except OSError:
                    pass
"""


def certificates(work: Path) -> tuple[Path, Path]:
    """A self-signed certificate for localhost and its key, made with openssl."""
    cert, key = work / "cert.pem", work / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-days", "1", "-subj", "/CN=localhost", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    return cert, key


def run_load(port: int, seconds: float, out: Path) -> dict:
    argv = [peers.find("memrelay-bench", BIN, "run `make build`"), "--server", f"127.0.0.1:{port}",
            "--threads", "1", "--clients", "16", "--ratio", "1:9", "--key-maximum", "9999",
            "--test-time", str(seconds), "--json-out", str(out), "--quiet"]
    subprocess.run(argv, check=True, timeout=seconds + 60, stdout=subprocess.DEVNULL)
    totals = json.loads(out.read_text())["totals"]
    return {"p99_us": totals["latency_us"]["p99"], "throughput": totals["ops_per_sec"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--json-out", type=Path, default=ROOT / "results" / "bench" / "handshakes.json")
    args = parser.parse_args()
    if os.environ.get("BENCH_QUICK"):
        args.repetitions, args.seconds = 2, 1.0
    procs = Processes()
    runs: dict[str, list[dict]] = {"quiet": [], "attacked": []}
    try:
        with tempfile.TemporaryDirectory(prefix="memrelay-handshakes-") as tmp:
            work = Path(tmp)
            cert, key = certificates(work)
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
            total = 2 * args.repetitions
            for i in range(args.repetitions):
                for kind in ("quiet", "attacked"):
                    done = len(runs["quiet"]) + len(runs["attacked"])
                    print(f"[{done + 1}/{total}] {kind}: {args.seconds:g} s of 16 clients"
                          + (f" beside {STALLED:,} stalled handshakes" if kind == "attacked" else ""), flush=True)
                    attacker = None
                    if kind == "attacked":
                        attacker = procs.start([sys.executable, "-c", ATTACKER, str(tls), str(STALLED)],
                                               work / "attacker.log")
                        wait_for_line(work / "attacker.log", "ready", attacker)
                    try:
                        runs[kind].append(run_load(plain, args.seconds, work / "bench.json"))
                    finally:
                        if attacker is not None:
                            attacker.kill()
                            attacker.wait()
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


def wait_for_line(log: Path, line: str, proc: subprocess.Popen, timeout: float = 30.0) -> None:
    import time
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.exists() and line in log.read_text():
            return
        if proc.poll() is not None:
            raise RuntimeError(f"the attacker exited: {log.read_text()}")
        time.sleep(0.05)
    raise RuntimeError(f"the attacker did not get ready in {timeout:g} s")


if __name__ == "__main__":
    sys.exit(main())
