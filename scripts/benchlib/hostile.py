"""Hostile connections beside honest load (scripts/bench_handshakes.py, scripts/bench_metrics.py):
an attacker process that holds a thousand connections to a port, half silent, half dribbling a
byte a second (a TLS ClientHello, or an HTTP request head that never ends), opening a new one
whenever the target closes one; the honest clients' load; and runs alternating alone and beside
the attacker, so that the machine's noise hits both alike."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from . import peers
from .processes import Processes

# The attacker: a separate process, so its own CPU shows up as what it is.
# argv: port, connections, what the dribbling half sends (`tls` or `http`).
ATTACKER = r"""
import resource, selectors, signal, socket, sys, time
port, count, drip_kind = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
def final_count(*_):  # stopped (SIGTERM): the last count, however short the run was
    print("closed by the target", closed, flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, final_count)
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, count + 100)), hard))
if drip_kind == "tls":  # the first bytes of a TLS ClientHello record (handshake, TLS 1.0 record, 512 bytes)
    drip = bytes([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03]) + bytes(32)
else:                   # a request head that never ends
    drip = b"GET /metrics HTTP/1.1\r\nHost: memrelay\r\n" + b"X-Slow: " + b"a" * 200
sel = selectors.DefaultSelector()
conns = {}  # socket -> bytes sent so far (None: silent)
def open_one(i):
    s = socket.socket()
    s.setblocking(False)
    try:
        s.connect(("127.0.0.1", port))
    except BlockingIOError:
        pass
    except OSError:
        s.close()
        return
    conns[s] = 0 if i % 2 else None
    sel.register(s, selectors.EVENT_READ)
for i in range(count):
    open_one(i)
closed = 0
print("ready", flush=True)
next_drip = time.monotonic() + 1
while True:
    for key, _ in sel.select(timeout=0.1):
        s = key.fileobj
        try:
            data = s.recv(4096)
        except OSError:
            data = b""
        if not data:  # the target closed it: a new one takes its place
            sel.unregister(s)
            slow = conns.pop(s) is not None
            s.close()
            open_one(1 if slow else 0)
            closed += 1
    while len(conns) < count:
        open_one(len(conns))
    if time.monotonic() >= next_drip:
        next_drip += 1
        print("closed by the target", closed, flush=True)
        for s, sent in list(conns.items()):
            if sent is not None and sent < len(drip):
                try:
                    s.send(drip[sent:sent + 1])
                    conns[s] = sent + 1
                except OSError:
                    pass
"""


def run_load(bin_dir: Path, port: int, seconds: float, out: Path) -> dict:
    """16 closed-loop memcached clients (1 write in 10) for `seconds`: their p99 (µs) and req/s."""
    argv = [peers.find("memrelay-bench", bin_dir, "run `make build`"), "--server", f"127.0.0.1:{port}",
            "--threads", "1", "--clients", "16", "--ratio", "1:9", "--key-maximum", "9999",
            "--test-time", str(seconds), "--json-out", str(out), "--quiet"]
    subprocess.run(argv, check=True, timeout=seconds + 60, stdout=subprocess.DEVNULL)
    totals = json.loads(out.read_text())["totals"]
    return {"p99_us": totals["latency_us"]["p99"], "throughput": totals["ops_per_sec"]}


def alternate(procs: Processes, work: Path, repetitions: int, attack: list[str], label: Callable[[str], str],
              run: Callable[[], dict], check: Callable[[], None] = lambda: None) -> dict[str, list[dict]]:
    """`run()` `repetitions` times alone ("quiet") and as often beside the attacker ("attacked",
    ATTACKER with the arguments `attack`), alternating; each attacked run's result gets
    `hostile_closed`, the attacker's count of its connections the target closed. `label(kind)`
    says what a run is; `check()` after each run raises if the target is in trouble."""
    runs: dict[str, list[dict]] = {"quiet": [], "attacked": []}
    log = work / "attacker.log"
    for _ in range(repetitions):
        for kind in ("quiet", "attacked"):
            done = len(runs["quiet"]) + len(runs["attacked"])
            print(f"[{done + 1}/{2 * repetitions}] {kind}: {label(kind)}", flush=True)
            attacker = None
            if kind == "attacked":
                attacker = procs.start([sys.executable, "-c", ATTACKER] + attack, log)
                wait_for_line(log, "ready", attacker)
            try:
                runs[kind].append(run())
            finally:
                if attacker is not None:
                    attacker.terminate()  # it prints its last count of closed connections
                    try:
                        attacker.wait(timeout=10)
                    except subprocess.TimeoutExpired:
                        attacker.kill()
                        attacker.wait()
            if attacker is not None:
                runs[kind][-1]["hostile_closed"] = closed_by_target(log)
            check()
    return runs


def closed_by_target(log: Path) -> int:
    """The attacker's last count of its connections the target closed (0 before its first report)."""
    counts = [int(line.split()[-1]) for line in log.read_text().splitlines() if line.startswith("closed by the target")]
    return counts[-1] if counts else 0


def wait_for_line(log: Path, line: str, proc: subprocess.Popen, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.exists() and line in log.read_text():
            return
        if proc.poll() is not None:
            raise RuntimeError(f"the attacker exited: {log.read_text()}")
        time.sleep(0.05)
    raise RuntimeError(f"the attacker did not get ready in {timeout:g} s")
