"""Hostile connections beside honest load (scripts/bench_handshakes.py, scripts/bench_metrics.py,
scripts/bench_sharing.py): attacker processes, the honest clients' load, and runs alternating
alone and beside the attacker, so that the machine's noise hits both alike.

Two attackers, each a separate process (its CPU is its own), each opening a new connection
whenever the target closes one and printing `ready`, then `closed by the target N` lines:

- ATTACKER holds a thousand connections to a port, half silent, half dribbling a byte a second (a
  TLS ClientHello, or an HTTP request head that never ends);
- PIPELINER holds N memcached connections that each pipeline many `get`s of a large value and
  then never read the replies, or read them slowly; with a process id and a limit it stops the
  attack (closes every connection, prints `capped ...`) once that process's RSS passes the limit."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from memrelay_lab.plumbing.processes import Processes

from . import peers

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


# The pipelining attacker. argv: port, connections, `never` (never reads) or `slow` (reads 1 KB
# per connection every 100 ms), the key, how many gets of it each connection pipelines, and
# optionally a process id and an RSS limit in bytes (the attack stops once that process's VmRSS
# passes it). The target may close a connection without the attacker seeing it (its FIN waits
# behind the replies nobody reads): once a second the attacker looks at the target's side of
# each connection in /proc/net/tcp and counts one that is no longer ESTABLISHED as closed.
PIPELINER = r"""
import resource, select, signal, socket, sys, time
port, count, mode, key, times = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5])
watch_pid = int(sys.argv[6]) if len(sys.argv) > 6 else 0
limit = int(sys.argv[7]) if len(sys.argv) > 7 else 0
request = ("get " + key + "\r\n").encode() * times
def final_count(*_):
    print("closed by the target", closed, flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, final_count)
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, count + 100)), hard))
poller = select.poll()
conns = {}  # fd -> socket
MASK = select.POLLRDHUP | select.POLLERR | select.POLLHUP
def open_one():
    s = socket.socket()
    s.settimeout(1)
    try:
        s.connect(("127.0.0.1", port))
        s.sendall(request)
    except OSError:
        s.close()
        return
    s.setblocking(False)
    conns[s.fileno()] = s
    poller.register(s, MASK)
def drop(fd):
    s = conns.pop(fd)
    poller.unregister(fd)
    s.close()
def vmrss():
    try:
        with open(f"/proc/{watch_pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0
def target_closed():
    # The target's side of our connections (local port = the target's, remote = ours), by state.
    ours = {s.getsockname()[1]: fd for fd, s in conns.items()}
    seen = set()
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            fields = line.split()
            local, remote, state = fields[1], fields[2], fields[3]
            if int(local.split(":")[1], 16) == port:
                theirs = int(remote.split(":")[1], 16)
                if theirs in ours and state == "01":
                    seen.add(ours[theirs])
    return [fd for fd in ours.values() if fd not in seen]
for _ in range(count):
    open_one()
closed = 0
capped = False
started = time.monotonic()
print("ready", flush=True)
next_read = next_scan = time.monotonic()
while True:
    for fd, _ in poller.poll(20):
        if fd in conns and not capped:
            drop(fd)
            closed += 1
    now = time.monotonic()
    if capped:
        time.sleep(0.1)
        continue
    if limit and vmrss() > limit:
        for fd in list(conns):
            drop(fd)
        capped = True
        print(f"capped after {now - started:.3f} s", flush=True)
        print("closed by the target", closed, flush=True)
        continue
    if mode == "slow" and now >= next_read:
        next_read += 0.1
        for fd, s in list(conns.items()):
            try:
                if not s.recv(1024):
                    drop(fd)
                    closed += 1
            except BlockingIOError:
                pass
            except OSError:
                drop(fd)
                closed += 1
    if now >= next_scan:
        next_scan += 1
        for fd in target_closed():
            drop(fd)
            closed += 1
        print("closed by the target", closed, flush=True)
    for _ in range(count - len(conns)):  # one try each per round: a target refusing them is not a busy loop
        open_one()
"""


def run_load(bin_dir: Path, port: int, seconds: float, out: Path, clients: int = 16) -> dict:
    """`clients` closed-loop memcached clients (1 write in 10, 32-byte values, keys memtier-0 to
    memtier-9999) for `seconds`: their p99 (µs) and req/s, and the requests answered and not
    (`unanswered`: sent and never answered, the connection lost or still waiting at the end).
    p99 and req/s are over the answered ones: a run where some were not is not a clean one."""
    argv = [peers.find("memrelay-bench", bin_dir, "run `make build`"), "--server", f"127.0.0.1:{port}",
            "--threads", "1", "--clients", str(clients), "--ratio", "1:9", "--key-maximum", "9999",
            "--test-time", str(seconds), "--json-out", str(out), "--quiet"]
    out.unlink(missing_ok=True)
    done = subprocess.run(argv, timeout=seconds + 60, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0 and (done.returncode != 1 or not out.exists()):  # 1 with JSON: every connection lost
        raise RuntimeError(f"memrelay-bench exited with status {done.returncode}: {done.stderr.strip()[-500:]}")
    totals = json.loads(out.read_text())["totals"]
    return {"p99_us": totals["latency_us"]["p99"], "throughput": totals["ops_per_sec"],
            "answered": totals["count"], "unanswered": totals.get("unanswered", 0)}


def alternate(procs: Processes, work: Path, repetitions: int, attack: list[str] | Callable[[], list[str]],
              label: Callable[[str], str], run: Callable[[], dict], check: Callable[[], None] = lambda: None,
              script: str = ATTACKER, before: Callable[[str], None] = lambda kind: None) -> dict[str, list[dict]]:
    """`run()` `repetitions` times alone ("quiet") and as often beside the attacker ("attacked",
    `script` with the arguments `attack`, or those `attack()` gives at that run), alternating; each
    attacked run's result gets `hostile_closed`, the attacker's count of its connections the target
    closed, and `capped_after_s` where the attacker stopped at its RSS limit. `label(kind)` says
    what a run is; `before(kind)` runs before each run and its attacker (e.g. starts a fresh
    target); `check()` after each run raises if the target is in trouble."""
    runs: dict[str, list[dict]] = {"quiet": [], "attacked": []}
    log = work / "attacker.log"
    for _ in range(repetitions):
        for kind in ("quiet", "attacked"):
            done = len(runs["quiet"]) + len(runs["attacked"])
            print(f"[{done + 1}/{2 * repetitions}] {kind}: {label(kind)}", flush=True)
            before(kind)
            attacker = None
            if kind == "attacked":
                attacker = procs.start([sys.executable, "-c", script] + (attack() if callable(attack) else attack), log)
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
                if (after := capped_after(log)) is not None:
                    runs[kind][-1]["capped_after_s"] = after
            check()
    return runs


def closed_by_target(log: Path) -> int:
    """The attacker's last count of its connections the target closed (0 before its first report)."""
    counts = [int(line.split()[-1]) for line in log.read_text().splitlines() if line.startswith("closed by the target")]
    return counts[-1] if counts else 0


def capped_after(log: Path) -> float | None:
    """Seconds after it got ready that the attacker stopped at its RSS limit (None: it did not)."""
    for line in log.read_text().splitlines():
        if line.startswith("capped after"):
            return float(line.split()[2])
    return None


def wait_for_line(log: Path, line: str, proc: subprocess.Popen, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.exists() and line in log.read_text():
            return
        if proc.poll() is not None:
            raise RuntimeError(f"the attacker exited: {log.read_text()}")
        time.sleep(0.05)
    raise RuntimeError(f"the attacker did not get ready in {timeout:g} s")
