"""Processor time of every process a run starts, over the measured interval (psutil).

A model of this machine needs what each program costs in processor time per request: the load
generator, memrelay and memcached share the same cores. `CpuSampler` takes a snapshot of every
process's user and system time (and, per thread, of memrelay's threads, by thread name: the net
thread, the workers, the event loops) when the kept interval starts (the load's start plus the
warm-up) and when it ends (the test time minus the cool-down), the same interval the clients'
throughput is averaged over; `cpu.json` in the run folder holds the differences, the machine's
cores and the cores this process may use.

The bytes every process sent and received over TCP (`_tcp_bytes`) are read at two network
snapshots a quarter of a second inside that interval (``network_interval_unix``): at the
interval's ends connections may still be opening or already closing (a run without warm-up or
cool-down ends when the load generator disconnects), and a closed socket's counters are gone.
cpu.json holds each process's ``received_bytes`` and ``sent_bytes`` over that interval.
The byte counters of the hosts' links, where the lab has them (`_link_bytes`, the testbed's
veths), are read at the kept interval's own ends instead, each reading with its own time taken
around it (``links_interval_unix``): an interface's counters lose nothing when connections
close, so they need no margin, and over the whole kept interval they count the bytes of the
very requests the clients' throughput counts. (They were read at the network snapshots, after
the socket dump whose time stood for them: on a busy machine the dump takes long enough that
bytes and interval disagreed by a third.) cpu.json's ``links`` holds per host
``to_host_bytes`` and ``from_host_bytes`` over that interval.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from ._link_bytes import link_bytes
from ._tcp_bytes import tcp_bytes

__all__ = ["CpuSampler", "machine_cores", "role_of", "thread_role"]


def machine_cores() -> dict[str, int]:
    """Cores of the machine and the cores this process (and the ones it starts) may run on."""
    return {"machine": os.cpu_count() or 1, "usable": len(os.sched_getaffinity(0))}


def role_of(name: str) -> str:
    """A run's process name (server-0, middleware-1, client-0-0, ...) as a role."""
    if name.startswith("server-"):
        return "memcached"
    if name.startswith("middleware-"):
        return "memrelay"
    return "bench"


def thread_role(thread_name: str) -> str:
    """memrelay's thread names as roles: net (the main thread, which is the pool engine's net
    thread), worker (pool), loop (evented), other (stats, probe, metrics, signals)."""
    if thread_name.startswith("worker-"):
        return "worker"
    if thread_name.startswith("loop-"):
        return "loop"
    if thread_name == "memrelay":
        return "net"
    return "other"


NETWORK_MARGIN_S = 0.25
# How long `finish` waits past the interval's end for the sampler's last snapshot. Its socket
# dump and /proc reads can take seconds on a starved machine: with 5 s, three runs of one
# `make test` beside other work lost their cpu.json (NaN processor times and cores; three lab
# tests failed). A snapshot that comes late still brackets the interval (its instant is kept).
LAST_SNAPSHOT_GRACE_S = 30.0


@dataclass
class _Snapshot:
    at: float
    process: dict[str, float]  # name -> user + system seconds
    threads: dict[str, dict[str, float]]  # name -> thread name -> seconds


def _snapshot(pids: dict[str, int], roles: dict[str, str], with_threads: bool = True) -> _Snapshot:
    process, threads = {}, {}
    for name, pid in pids.items():
        try:
            proc = psutil.Process(pid)
            times = proc.cpu_times()
            process[name] = times.user + times.system
            if with_threads and roles.get(name, role_of(name)) == "memrelay":
                threads[name] = _thread_times(proc)
        except psutil.Error:
            continue  # gone: the run's own checks report it
    return _Snapshot(time.time(), process, threads)


def _thread_times(proc: psutil.Process) -> dict[str, float]:
    by_name: dict[str, float] = {}
    for thread in proc.threads():
        try:
            comm = Path(f"/proc/{proc.pid}/task/{thread.id}/comm").read_text().strip()
        except OSError:
            continue
        by_name[comm] = by_name.get(comm, 0.0) + thread.user_time + thread.system_time
    return by_name


@dataclass
class CpuSampler:
    """Snapshots at `start` and `end` (unix seconds) on a thread of its own; `write` saves the
    differences."""

    pids: dict[str, int]
    start: float
    end: float
    #: Host name -> the lab's interface carrying that host's link (`_link_bytes`).
    links: dict[str, str] = field(default_factory=dict)
    #: Process name -> role where the name does not tell it (a middleware that is no memrelay:
    #: ``proxy``).
    roles: dict[str, str] = field(default_factory=dict)
    _first: _Snapshot | None = None
    _last: _Snapshot | None = None
    _network: list[tuple[float, dict[str, tuple[int, int]]]] = field(default_factory=list, repr=False)
    # Processor times at the network readings (inside the interval): for a process gone by the end.
    _inside: list[_Snapshot] = field(default_factory=list, repr=False)
    _links: list[tuple[float, dict[str, tuple[int, int]]]] = field(default_factory=list, repr=False)
    _thread: threading.Thread | None = field(default=None, repr=False)
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)

    def begin(self) -> None:
        self._thread = threading.Thread(target=self._run, name="cpu-sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        margin = min(NETWORK_MARGIN_S, (self.end - self.start) / 8)
        for at, take in ((self.start, self._take_first), (self.start + margin, self._take_network),
                         (self.end - margin, self._take_network), (self.end, self._take_last)):
            if self._stop.wait(max(at - time.time(), 0.0)):
                return
            take()

    def _take_first(self) -> None:
        self._take_links()
        self._first = _snapshot(self.pids, self.roles)

    def _take_last(self) -> None:
        self._take_links()
        self._last = _snapshot(self.pids, self.roles)

    def _take_links(self) -> None:
        """The links' counters with the time they were read at (the middle of the reading)."""
        if self.links:
            before = time.time()
            counters = link_bytes(self.links)
            self._links.append(((before + time.time()) / 2, counters))

    def _take_network(self) -> None:
        # Processor times first: the socket dump can take seconds on a loaded machine, by which
        # time a load generator may have exited.
        self._inside.append(_snapshot(self.pids, self.roles, with_threads=False))
        self._network.append(tcp_bytes(self.pids))

    def finish(self) -> dict | None:
        """Waits for the last snapshot (the load has ended by then); None if one is missing."""
        if self._thread is not None:
            self._thread.join(timeout=max(self.end - time.time(), 0.0) + LAST_SNAPSHOT_GRACE_S)
        self._stop.set()
        if self._first is None or self._last is None:
            return None
        first, last = self._first, self._last
        processes = {}
        for name, seconds in last.process.items():
            if name not in first.process:
                continue
            record = {"role": self.roles.get(name, role_of(name)), "cpu_s": round(seconds - first.process[name], 6)}
            if name in last.threads:
                record["threads"] = {
                    thread: round(t - first.threads.get(name, {}).get(thread, 0.0), 6)
                    for thread, t in last.threads[name].items()
                }
            processes[name] = record
        # A process gone by the last snapshot (a load generator that exits as the kept interval
        # ends, or whose sampler woke late on a loaded machine): its processor time up to the
        # last reading inside the interval, scaled to the whole interval (the load is steady in
        # the kept interval). Without it the clients' processor time was 0 to the models.
        for name, seconds in first.process.items():
            inside = [snap for snap in self._inside if name in snap.process and snap.at > first.at]
            if name in processes or not inside:
                continue
            snap = inside[-1]
            scale = (last.at - first.at) / (snap.at - first.at)
            processes[name] = {"role": role_of(name), "cpu_s": round((snap.process[name] - seconds) * scale, 6),
                               "cpu_scaled_from_unix": [first.at, snap.at]}
        # Network bytes also for a process the processor snapshots missed (a load generator that
        # exits as the kept interval ends): the network snapshots are taken inside the interval.
        if len(self._network) == 2:
            (_, before), (_, after) = self._network
            for name in before.keys() & after.keys():
                received, sent = after[name][0] - before[name][0], after[name][1] - before[name][1]
                if received >= 0 and sent >= 0:  # less than before: a connection closed in between
                    record = processes.setdefault(name, {"role": self.roles.get(name, role_of(name))})
                    record["received_bytes"], record["sent_bytes"] = received, sent
        document = {"interval_unix": [first.at, last.at], "cores": machine_cores(), "processes": processes}
        if len(self._links) == 2:
            (link_start, before_links), (link_end, after_links) = self._links
            document["links_interval_unix"] = [link_start, link_end]
            document["links"] = {
                host: {"to_host_bytes": after_links[host][0] - before_links[host][0],
                       "from_host_bytes": after_links[host][1] - before_links[host][1]}
                for host in before_links.keys() & after_links.keys()}
        if len(self._network) == 2:
            document["network_interval_unix"] = [self._network[0][0], self._network[1][0]]
        return document

    def write(self, path: Path) -> dict | None:
        document = self.finish()
        if document is not None:
            path.write_text(json.dumps(document, indent=1))
        return document
