"""One run: start the processes, apply the load, save what they measured, stop them.

`execute_run` goes through the steps of `OneRun` in order:

1. `start_servers`: the memcached servers, each waited for until it listens (free ports on
   their hosts);
2. `start_middlewares`: the middlewares (none for a baseline): memrelay, each with its own
   ``--stats-dir``, or the configuration's other proxy (`_proxies`: twemproxy, memcached's
   proxy) with its configuration file in the run's folder;
3. `populate`: ``memrelay-bench --populate`` over the key range when the workload reads
   (seed 000 §1.10), straight to every server when keys live on every server (no middleware,
   or distribution "all"), through middleware 0 with ketama (so keys land on their
   replicas; the middleware then also counts these sets);
4. `apply_load`: save each server's ``stats`` ("before"), start every bench instance, all
   told to begin their load at one instant (``--start-at``, `_start_time`: on each host's own
   clock, so that their kept intervals overlap however long the starts took), sample every process's processor time over the kept interval (`_cpu`, cpu.json), wait for
   the benches, save ``stats`` again ("after");
5. `stop`: SIGTERM the middlewares (memrelay writes summary.json), then stop the servers.

A failure raises `RunFailed` with the reason; whatever happens, every process the run
started is stopped and recorded in the run's manifest record, and every file the run's
processes wrote on other hosts is copied back into the run's folder.

Each role runs on its own hosts (`_roles.RoleHosts`); paths in the command lines are the
host's places of the results folder's files (``host.path``).
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._binaries import find_proxy
from ._cpu import CpuSampler, machine_cores
from ._proxies import BLACK_BOX, proxy_launch
from ._expand import Run, placement
from ._hosts import Host, HostError, ProcessHandle
from ._roles import RoleHosts
from ._ssh import SSHHost
from ._start_time import on_host_clock, start_margin
from ._binaries import Binaries
from ._processes import (
    ProcessFailed,
    bench_command,
    log_tail,
    memcached_command,
    memrelay_command,
    populate_command,
    server_stats,
    wait_until_listening,
)

__all__ = ["OneRun", "RunFailed", "execute_run"]


class RunFailed(Exception):
    """One run failed; the reason is the message."""


@dataclass
class _Middleware:
    handle: ProcessHandle
    port: int
    stats_dir: Path | None  # None: a proxy measured from outside (no summary.json)


@dataclass
class OneRun:
    """The state of one run while it executes: its processes, its files, its timeline."""

    run: Run
    run_dir: Path
    out: Path
    record: dict
    hosts: RoleHosts
    settings: dict[str, Any]
    ticker: Callable[[float, float], None] = lambda started, test_time: None  # (load started, test time)
    tick_done: Callable[[], None] = lambda: None
    #: Each host's clock minus the lab's (seconds), as `_environment` measured it.
    clock_offsets: dict[str, float] = field(default_factory=dict)
    handles: list[ProcessHandle] = field(default_factory=list)
    servers: list[tuple[ProcessHandle, int]] = field(default_factory=list)
    middlewares: list[_Middleware] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.config = self.run.configuration
        self.files: dict[str, Any] = {"servers": [], "middlewares": [], "clients": [], "populate": []}
        self.record["files"] = self.files
        self.record["processes"] = []
        self.timeline: dict[str, float] = {}
        self.record["timeline"] = self.timeline  # wall-clock seconds since the run started, per stage
        self._host_of: dict[str, Host] = {}  # process name -> its host

    # ------------------------------------------------------------ helpers

    def _rel(self, path: Path) -> str:
        return str(Path(path).relative_to(self.out))

    def _mark(self, stage: str) -> None:
        self.timeline[stage] = round(time.time() - self.record["started_unix"], 3)

    def _start(self, host: Host, name: str, argv: list[str]) -> ProcessHandle:
        handle = host.start(name, argv, self.run_dir / f"{name}.log")
        self.handles.append(handle)
        self._host_of[name] = host
        return handle

    def host_of(self, handle: ProcessHandle) -> Host:
        return self._host_of[handle.name]

    def _binaries(self, host: Host) -> Binaries:
        return self.hosts.binaries_on(host)

    @property
    def server_addresses(self) -> list[str]:
        return [f"{self.host_of(h).address}:{port}" for h, port in self.servers]

    @property
    def middleware_addresses(self) -> list[str]:
        return [f"{self.host_of(m.handle).address}:{m.port}" for m in self.middlewares]

    @property
    def services(self) -> list[ProcessHandle]:
        return [h for h, _ in self.servers] + [m.handle for m in self.middlewares]

    # ------------------------------------------------------------ the steps

    def start_servers(self) -> None:
        for j in range(self.config.servers):
            host = self.hosts.server(j)
            port = host.free_port()
            argv = memcached_command(self._binaries(host).memcached, host.address, port,
                                     self.settings["memcached_memory_mb"], self.settings["memcached_threads"],
                                     as_root=host.user_is_root)
            handle = self._start(host, f"server-{j}", argv)
            self.servers.append((handle, port))
            self.files["servers"].append({"log": self._rel(handle.log_path), "host": host.name})
        for handle, port in self.servers:
            wait_until_listening(self.host_of(handle), handle, port)
        self._mark("servers_ready")

    def start_middlewares(self) -> None:
        program = getattr(self.config, "middleware", None) or "memrelay"
        for k in range(self.config.middlewares):
            host = self.hosts.middleware(k)
            port = host.free_port()
            if program in BLACK_BOX:
                self._start_proxy(program, k, host, port)
                continue
            stats_dir = self.run_dir / f"middleware-{k}"
            argv = memrelay_command(self._binaries(host).memrelay, self.config, f"{host.address}:{port}",
                                    self.server_addresses, host.path(stats_dir), self.settings["request_log_sample"])
            handle = self._start(host, f"middleware-{k}", argv)
            self.middlewares.append(_Middleware(handle, port, stats_dir))
            self.files["middlewares"].append({
                "host": host.name,
                "program": "memrelay",
                "log": self._rel(handle.log_path),
                "summary": self._rel(stats_dir / "summary.json"),
                "windows": self._rel(stats_dir / "windows.jsonl"),
            })
        for middleware in self.middlewares:
            wait_until_listening(self.host_of(middleware.handle), middleware.handle, middleware.port)
        self._mark("middlewares_ready")

    def _start_proxy(self, program: str, k: int, host: Host, port: int) -> None:
        """twemproxy or memcached's proxy as middleware k, its configuration file beside its log."""
        launch = proxy_launch(program, find_proxy(program), self.config, host.address, port, host.free_port(),
                              self.server_addresses, usable_cores=machine_cores()["usable"],
                              as_root=host.user_is_root)
        config_path = self.run_dir / f"middleware-{k}.{launch.config_name}"
        config_path.write_text(launch.config_text)
        if isinstance(host, SSHHost):
            host.put(config_path, str(host.path(config_path)), mode=0o644)
        handle = self._start(host, f"middleware-{k}", launch.command(str(host.path(config_path))))
        self.middlewares.append(_Middleware(handle, port, None))
        self.files["middlewares"].append({
            "host": host.name, "program": program, "log": self._rel(handle.log_path),
            "config": self._rel(config_path), "routing": launch.routing,
        })

    def populate(self) -> None:
        if not self.config.populate:
            return
        if self.config.middlewares and self.config.distribution == "ketama":
            targets = [("middleware-0", self.middleware_addresses[0])]
        else:
            targets = [(f"server-{j}", address) for j, address in enumerate(self.server_addresses)]
        populating = []
        host = self.hosts.client(0)
        for name, target in targets:
            json_out = self.run_dir / f"populate-{name}.json"
            argv = populate_command(self._binaries(host).bench, self.config, target, host.path(json_out))
            handle = self._start(host, f"populate-{name}", argv)
            populating.append((handle, json_out))
            self.files["populate"].append(
                {"target": name, "json": self._rel(json_out), "log": self._rel(handle.log_path)}
            )
        timeout = 60.0 + self.config.keys * self.config.value_size / 5e6
        wait_all(self.host_of, [h for h, _ in populating], timeout, self.services)
        for handle, json_out in populating:
            check_bench(self.host_of(handle), handle, json_out, 0.0, phase="populate")
        self._mark("populated")

    def apply_load(self) -> None:
        self._save_server_stats("before")
        instances = placement(self.config)
        remote = sum(isinstance(self.hosts.client(i.machine), SSHHost) for i in instances)
        # One instant on the lab's clock for every bench; each is given it on its own host's clock.
        started = time.time() + start_margin(len(instances) - remote, remote)
        self.record["load_start_at_unix"] = started
        benches = []
        for instance in instances:
            addresses = self.middleware_addresses if instance.target_kind == "middleware" else self.server_addresses
            targets = [addresses[t] for t in instance.targets]
            json_out = self.run_dir / f"{instance.name}.json"
            host = self.hosts.client(instance.machine)
            start_at = on_host_clock(started, self.clock_offsets.get(host.name, 0.0))
            argv = bench_command(self._binaries(host).bench, self.config, targets,
                                 self.settings["seed"] + instance.index, host.path(json_out), start_at=start_at)
            handle = self._start(host, instance.name, argv)
            benches.append((handle, json_out))
            self.files["clients"].append({
                "machine": instance.machine, "host": host.name, "instance": instance.instance, "targets": targets,
                "json": self._rel(json_out), "log": self._rel(handle.log_path), "start_at_unix": start_at,
            })
        self._mark("loaders_started")
        # Seconds the starts left before the load began (negative: they took longer than planned,
        # and the benches began late; the overlap check of the results then says by how much).
        self.record["load_start_spare_s"] = round(started - time.time(), 3)
        self.record["load_started_unix"] = started
        self.timeline["load_started"] = round(started - self.record["started_unix"], 3)
        test_time = self.config.test_time
        # Processor time of every process over the interval the clients' means are kept for
        # (of the processes this machine can see: its own, and those of hosts sharing its kernel).
        pids = {h.name: h.pid for h in self.handles
                if self.host_of(h).name in self.hosts.visible and self.host_of(h).poll(h) is None}
        links = {host.name: host.spec.link_interface for host in self.hosts.all()
                 if isinstance(host, SSHHost) and host.spec.link_interface}
        roles = {m.handle.name: "proxy" for m in self.middlewares if m.stats_dir is None}
        sampler = CpuSampler(pids, started + self.config.warmup, started + test_time - self.config.cooldown,
                             links=links, roles=roles)
        sampler.begin()
        wait_all(self.host_of, [h for h, _ in benches], max(started - time.time(), 0.0) + test_time + 30.0,
                 self.services,
                 ticker=lambda: self.ticker(started, test_time))
        self.tick_done()
        self._mark("load_ended")
        if sampler.write(self.run_dir / "cpu.json") is not None:
            self.files["cpu"] = self._rel(self.run_dir / "cpu.json")
        self._save_server_stats("after")
        totals = [check_bench(self.host_of(h), h, json_out, self.settings["max_error_rate"])
                  for h, json_out in benches]
        self.record["clients_throughput"] = sum(t.get("ops_per_sec", 0.0) for t in totals)

    def _save_server_stats(self, when: str) -> None:
        for j, (handle, port) in enumerate(self.servers):
            path = self.run_dir / f"server-{j}.stats-{when}.txt"
            path.write_text(server_stats(self.host_of(handle).address, port))
            self.files["servers"][j][f"stats_{when}"] = self._rel(path)

    def stop(self) -> None:
        """Middlewares first (they write summary.json on SIGTERM), then the servers."""
        for middleware in self.middlewares:
            handle = middleware.handle
            host = self.host_of(handle)
            if host.poll(handle) is not None:
                raise RunFailed(f"{handle.name} exited with status {handle.returncode} during the run "
                                f"(log: {handle.log_path})")
            status = host.stop(handle, grace=15.0)
            if middleware.stats_dir is None:  # a proxy measured from outside writes nothing
                continue
            summary = middleware.stats_dir / "summary.json"
            if host.fetch(summary, summary) is None:
                raise RunFailed(f"{handle.name} wrote no summary.json (exit status {status}; log: {handle.log_path})")
        self._mark("middlewares_stopped")
        # memcached holds nothing worth a graceful exit (its stats are saved), and that exit
        # takes it most of a second: SIGKILL.
        for handle, _ in self.servers:
            self.host_of(handle).stop(handle, grace=5.0, sig=signal.SIGKILL)
        self._mark("servers_stopped")

    def stop_everything(self, hurry: bool) -> None:
        """Stop whatever still runs (all at once per host; a no-op after `stop`), copy back what
        the other hosts wrote, and record the processes."""
        for host in self.hosts.all():
            mine = [h for h in self.handles if self.host_of(h) is host]
            if mine:
                try:
                    host.stop_many(mine, grace=2.0 if hurry else 5.0)
                except HostError as error:  # the host went away: its processes went with the connection
                    self.record["stop_error"] = str(error)
        if not hurry:
            for host in self.hosts.all():
                if any(self.host_of(h) is host for h in self.handles):
                    try:
                        host.collect(self.run_dir)
                    except HostError as error:  # the run's own outcome stays what it was
                        self.record["collect_error"] = str(error)
        self.record["processes"] = [{**h.as_dict(), "host": self.host_of(h).name} for h in self.handles]


def execute_run(one: OneRun, interrupted: Callable[[], bool]) -> None:
    """Start, measure and stop one run; raises RunFailed (the run's processes are stopped)."""
    one.run_dir.mkdir(parents=True)
    try:
        one.start_servers()
        one.start_middlewares()
        one.populate()
        one.apply_load()
        one.stop()
    except (ProcessFailed, HostError) as failure:
        raise RunFailed(str(failure)) from None
    except OSError as failure:  # a server that stopped answering `stats`, a full disk, ...
        raise RunFailed(f"{type(failure).__name__}: {failure}") from None
    finally:
        one.stop_everything(hurry=interrupted())


def wait_all(host_of: Callable[[ProcessHandle], Host], clients: list[ProcessHandle], timeout: float,
             services: list[ProcessHandle], ticker: Callable[[], None] | None = None) -> None:
    """Wait for every client to exit while the ``services`` they need stay up.

    Fails fast: a service that exits, or a client that exits non-zero while others still run.
    """
    deadline = time.monotonic() + timeout
    while True:
        running = [c for c in clients if host_of(c).poll(c) is None]
        for client in clients:
            if client.returncode not in (None, 0):
                raise RunFailed(f"{client.name} exited with status {client.returncode}{log_tail(client.log_path)} "
                                f"(log: {client.log_path})")
        if not running:
            return
        for service in services:
            if host_of(service).poll(service) is not None:
                raise RunFailed(f"{service.name} exited with status {service.returncode} while "
                                f"{running[0].name} was running{log_tail(service.log_path)} (log: {service.log_path})")
        if time.monotonic() > deadline:
            raise RunFailed(f"{running[0].name} did not finish within {timeout:.0f} s (log: {running[0].log_path})")
        if ticker:
            ticker()
        host_of(running[0]).wait(running[0], 0.2)


def check_bench(host: Host, handle: ProcessHandle, json_out: Path, max_error_rate: float,
                 phase: str = "run") -> dict:
    """The bench's totals of ``phase``; RunFailed if it failed or saw too many errors."""
    if host.fetch(json_out, json_out) is None:
        raise RunFailed(f"{handle.name} wrote no {json_out.name} (exit status {handle.returncode}; "
                        f"log: {handle.log_path})")
    try:
        document = json.loads(json_out.read_text())
    except (OSError, ValueError) as error:
        raise RunFailed(f"{handle.name}: unreadable {json_out.name}: {error}") from None
    if handle.returncode != 0 or document.get("status") != "completed":
        message = document.get("message") or f"exit status {handle.returncode}"
        raise RunFailed(f"{handle.name}: {document.get('status')}: {message} (log: {handle.log_path})")
    totals = (document.get("populate") or {}).get("totals", {}) if phase == "populate" else document.get("totals", {})
    count, errors = totals.get("count", 0), totals.get("errors", 0)
    if phase == "populate" and errors:
        raise RunFailed(f"{handle.name}: {errors} errors while populating (log: {handle.log_path})")
    if count == 0 and phase == "run":
        raise RunFailed(f"{handle.name}: no request was answered (log: {handle.log_path})")
    if errors > max_error_rate * max(count, 1):
        raise RunFailed(f"{handle.name}: {errors} errors in {count} requests, above max_error_rate "
                        f"{max_error_rate:g} (first: {_first_error(document)})")
    return totals


def _first_error(document: dict) -> str:
    first = (document.get("errors") or {}).get("first") or []
    return first[0].get("message", "?") if first else "?"
