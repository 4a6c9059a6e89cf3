"""Running an experiment: the loop over runs, progress, the manifest, resuming, and stopping cleanly.

``run_experiment(experiment, out_dir)`` executes every run of ``plan(experiment)``. One run:

1. start the memcached servers and wait until they listen (free loopback ports);
2. start the middlewares (none for a baseline), each with its own ``--stats-dir``;
3. populate: ``memrelay-bench --populate`` over the key range when the workload reads
   (seed 000 §1.10) — straight to every server when keys live on every server (no
   middleware, or distribution "all"), through middleware 0 with ketama (so keys land on
   their replicas; the middleware then also counts these sets);
4. save each server's ``stats`` ("before"), start every bench instance at once, wait for
   them, save ``stats`` again ("after");
5. SIGTERM the middlewares (they write summary.json), stop the servers.

Every raw output stays under ``OUT/runs/<run id>/``: ``client-M-I.json`` and ``.log`` per
bench instance, ``middleware-K/`` (summary.json, windows.jsonl) and ``middleware-K.log``,
``server-J.log``, ``server-J.stats-before.txt`` / ``.stats-after.txt``, ``populate-*.json``.
``OUT/manifest.json`` (rewritten after every run) holds the experiment (its file is copied to
``OUT/experiment.toml``), the configurations, every run with its status, times, files and
processes, the git commit, program versions, machine facts and start/end times.

A run fails (recorded with the reason and the logs; the experiment goes on) when a process
dies or never listens (a port taken), a bench exits non-zero or reports a status other than
``completed``, its error rate exceeds ``max_error_rate``, or a middleware writes no summary.

Resuming (``resume=True``) into a folder with a manifest skips every run recorded as
completed with the same configuration; failed and unfinished runs are run again.

Ctrl-C (SIGINT) or SIGTERM: the current run's processes are stopped (process groups, SIGTERM
then SIGKILL), the manifest records the run as interrupted, and :class:`Interrupted` is
raised (the CLI exits 130). Further signals during that cleanup are ignored, so one Ctrl-C
is enough and the cleanup cannot be cut short.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Iterator

from ._expand import Configuration, Run, placement, plan
from ._hosts import Host, LocalHost, ProcessHandle
from ._processes import (
    REPO,
    Binaries,
    ProcessFailed,
    bench_command,
    find_binaries,
    log_tail,
    memcached_command,
    memrelay_command,
    populate_command,
    program_versions,
    server_stats,
    wait_until_listening,
)
from ._spec import Experiment

__all__ = ["ExperimentSummary", "Interrupted", "ResultsExist", "run_experiment"]

MANIFEST = "manifest.json"
FORMAT = "memrelay-lab-results/1"
# Seconds a run takes beyond its test time (start, populate, stop), until one was measured.
_OVERHEAD_GUESS_S = 1.0


class Interrupted(BaseException):
    """The experiment was stopped by a signal; everything it started has been stopped."""

    def __init__(self, signum: int):
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum = signum

    @property
    def exit_status(self) -> int:
        return 128 + self.signum


class ResultsExist(RuntimeError):
    """The output folder already holds results and resuming was not asked for."""


class RunFailed(Exception):
    """One run failed; the reason is the message."""


@dataclass
class ExperimentSummary:
    """What happened: counts of runs by outcome, where the results are, how long it took."""

    out_dir: Path
    total: int
    completed: int
    failed: int
    skipped: int
    interrupted: int
    wall_s: float
    failures: list[tuple[str, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.failed == 0 and self.interrupted == 0

    def describe(self) -> str:
        text = (
            f"{self.total} runs: {self.completed} completed"
            + (f" ({self.skipped} already done, skipped)" if self.skipped else "")
            + f", {self.failed} failed"
            + (f", {self.interrupted} interrupted" if self.interrupted else "")
            + f"; wall time {_duration(self.wall_s)}; results in {self.out_dir}"
        )
        for run_id, reason in self.failures:
            text += f"\n  failed {run_id}: {reason}"
        return text


def default_out_dir(experiment: Experiment, base: Path | str = "results") -> Path:
    """results/NAME, or results/NAME-PROFILE with a profile (so the two never mix)."""
    suffix = f"-{experiment.profile}" if experiment.profile else ""
    return Path(base) / f"{experiment.name}{suffix}"


def run_experiment(
    experiment: Experiment,
    out_dir: str | Path | None = None,
    *,
    resume: bool = False,
    host: Host | None = None,
    binaries: Binaries | None = None,
    progress: IO[str] | None = None,
    handle_signals: bool = True,
) -> ExperimentSummary:
    """Run every configuration of ``experiment`` its number of repetitions (module docstring).

    Raises SpecError for an impossible design, BinaryNotFound for a missing program,
    ResultsExist when ``out_dir`` holds results and ``resume`` is False, and Interrupted
    (after stopping everything) on SIGINT/SIGTERM when ``handle_signals`` is True.
    """
    runs = plan(experiment)  # validates the whole design before anything starts
    binaries = binaries or find_binaries()
    host = host or LocalHost()
    out = Path(out_dir) if out_dir is not None else default_out_dir(experiment)
    previous = _previous_manifest(out, resume)
    _check_same_experiment(previous, experiment, out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "experiment.toml").write_text(experiment.text, encoding="utf-8")

    started = time.time()
    configs = {run.configuration.index: run.configuration for run in runs}
    manifest: dict[str, Any] = {
        "format": FORMAT,
        "experiment": {
            "name": experiment.name,
            "description": experiment.description,
            "profile": experiment.profile,
            "source": experiment.source,
            "file": "experiment.toml",
            "values": {key: list(values) for key, values in experiment.values.items()},
            "settings": dict(experiment.settings),
            "combinations": None if experiment.combinations is None
            else [{k: list(v) for k, v in block.items()} for block in experiment.combinations],
            "swept": experiment.swept,
        },
        "configurations": [config.as_dict() for config in configs.values()],
        "runs": [],
        "git": _git_facts(),
        "versions": program_versions(binaries),
        "binaries": {"memcached": binaries.memcached, "memrelay": binaries.memrelay, "memrelay-bench": binaries.bench},
        "machine": _machine_facts(),
        "lab": {"python": sys.version.split()[0], "argv": sys.argv, "host": host.name},
        "started_unix": started,
        "ended_unix": None,
        "status": "running",
        "resumed_from": previous.get("started_unix") if previous else None,
    }
    old_runs = {record["id"]: record for record in (previous or {}).get("runs", [])}
    records: list[dict] = []
    for run in runs:
        old = old_runs.get(run.id)
        if old and old.get("status") == "completed" and _same_configuration(old, run.configuration) \
                and _files_exist(out, old):
            records.append({**old, "skipped_on_resume": True})
        else:
            records.append(_pending_record(run))
    manifest["runs"] = records
    _write_manifest(out, manifest)

    reporter = _Progress(progress if progress is not None else sys.stderr, runs, records, experiment)
    summary = ExperimentSummary(out, len(runs), 0, 0, 0, 0, 0.0)
    signals = _SignalGuard() if handle_signals else None
    # The handlers stay installed through the cleanup below, so a second Ctrl-C cannot cut it short.
    with signals.installed() if signals else _nothing():
        try:
            for number, (run, record) in enumerate(zip(runs, records), start=1):
                if record.get("skipped_on_resume"):
                    summary.skipped += 1
                    summary.completed += 1
                    reporter.skipped(number, run)
                    continue
                reporter.starting(number, run)
                run_dir = out / "runs" / run.id
                if run_dir.exists():
                    shutil.rmtree(run_dir)  # leftovers of a failed or interrupted attempt
                record.update(status="running", started_unix=time.time())
                _write_manifest(out, manifest)
                try:
                    _execute(run, run_dir, out, record, host, binaries, experiment, reporter, signals)
                    record["status"] = "completed"
                    summary.completed += 1
                except Exception as failure:  # RunFailed, or a surprise: either way this run only
                    reason = str(failure) if isinstance(failure, RunFailed) else \
                        f"internal error: {type(failure).__name__}: {failure}"
                    record.update(status="failed", reason=reason)
                    summary.failed += 1
                    summary.failures.append((run.id, reason))
                except Interrupted:
                    record.update(status="interrupted", reason="stopped by a signal")
                    summary.interrupted += 1
                    raise
                finally:
                    record["ended_unix"] = time.time()
                    record["wall_s"] = record["ended_unix"] - record["started_unix"]
                    _write_manifest(out, manifest)
                reporter.finished(number, run, record)
            manifest["status"] = "completed"
        except Interrupted:
            manifest["status"] = "interrupted"
            raise
        except BaseException:
            manifest["status"] = "aborted"
            raise
        finally:
            if signals:
                signals.stopping = True  # ignore further signals: nothing below may be cut short
            host.stop_all(grace=2.0)
            manifest["ended_unix"] = time.time()
            _write_manifest(out, manifest)
            summary.wall_s = time.time() - started
            reporter.summary(summary, manifest["status"])
    return summary


# ---------------------------------------------------------------- one run


def _execute(
    run: Run, run_dir: Path, out: Path, record: dict, host: Host, binaries: Binaries,
    experiment: Experiment, reporter: "_Progress", signals: "_SignalGuard | None",
) -> None:
    """Start, measure and stop one run; raises RunFailed (the run's processes are stopped)."""
    config = run.configuration
    settings = experiment.settings
    run_dir.mkdir(parents=True)
    rel = lambda path: str(Path(path).relative_to(out))  # noqa: E731
    files: dict[str, Any] = {"servers": [], "middlewares": [], "clients": [], "populate": []}
    record["files"] = files
    record["processes"] = []
    timeline: dict[str, float] = {}
    record["timeline"] = timeline  # wall-clock seconds since the run started, per stage
    mark = lambda stage: timeline.__setitem__(stage, round(time.time() - record["started_unix"], 3))  # noqa: E731
    handles: list[ProcessHandle] = []

    def start(name: str, argv: list[str]) -> ProcessHandle:
        handle = host.start(name, argv, run_dir / f"{name}.log")
        handles.append(handle)
        return handle

    try:
        # 1. servers
        servers = []
        for j in range(config.servers):
            port = host.free_port()
            handle = start(f"server-{j}", memcached_command(binaries.memcached, host.address, port,
                                                            settings["memcached_memory_mb"],
                                                            settings["memcached_threads"]))
            servers.append((handle, port))
            files["servers"].append({"log": rel(handle.log_path)})
        for handle, port in servers:
            wait_until_listening(host, handle, port)
        mark("servers_ready")
        server_addresses = [f"{host.address}:{port}" for _, port in servers]

        # 2. middlewares
        middlewares = []
        for k in range(config.middlewares):
            port = host.free_port()
            stats_dir = run_dir / f"middleware-{k}"
            handle = start(f"middleware-{k}", memrelay_command(binaries.memrelay, config, f"{host.address}:{port}",
                                                               server_addresses, stats_dir,
                                                               settings["request_log_sample"]))
            middlewares.append((handle, port, stats_dir))
            files["middlewares"].append({
                "log": rel(handle.log_path),
                "summary": rel(stats_dir / "summary.json"),
                "windows": rel(stats_dir / "windows.jsonl"),
            })
        for handle, port, _ in middlewares:
            wait_until_listening(host, handle, port)
        mark("middlewares_ready")
        middleware_addresses = [f"{host.address}:{port}" for _, port, _ in middlewares]

        # 3. populate
        if config.populate:
            if config.middlewares and config.distribution == "ketama":
                targets = [("middleware-0", middleware_addresses[0])]
            else:
                targets = [(f"server-{j}", address) for j, address in enumerate(server_addresses)]
            populating = []
            for name, target in targets:
                json_out = run_dir / f"populate-{name}.json"
                handle = start(f"populate-{name}", populate_command(binaries.bench, config, target, json_out))
                populating.append((handle, json_out))
                files["populate"].append({"target": name, "json": rel(json_out), "log": rel(handle.log_path)})
            timeout = 60.0 + config.keys * config.value_size / 5e6
            _wait_all(host, [h for h, _ in populating], timeout, [h for h, _ in servers] + [h for h, _, _ in middlewares])
            for handle, json_out in populating:
                _check_bench(host, handle, json_out, 0.0, phase="populate")
            mark("populated")

        # 4. load
        for j, (handle, port) in enumerate(servers):
            path = run_dir / f"server-{j}.stats-before.txt"
            path.write_text(server_stats(host.address, port))
            files["servers"][j]["stats_before"] = rel(path)
        benches = []
        for instance in placement(config):
            if instance.target_kind == "middleware":
                targets = [middleware_addresses[t] for t in instance.targets]
            else:
                targets = [server_addresses[t] for t in instance.targets]
            json_out = run_dir / f"{instance.name}.json"
            argv = bench_command(binaries.bench, config, targets, settings["seed"] + instance.index, json_out)
            handle = start(instance.name, argv)
            benches.append((handle, json_out))
            files["clients"].append({
                "machine": instance.machine, "instance": instance.instance, "targets": targets,
                "json": rel(json_out), "log": rel(handle.log_path),
            })
        record["load_started_unix"] = time.time()
        mark("load_started")
        services = [h for h, _ in servers] + [h for h, _, _ in middlewares]
        _wait_all(host, [h for h, _ in benches], config.test_time + 30.0, services,
                  ticker=lambda: reporter.tick(record["load_started_unix"], config.test_time))
        reporter.tick_done()
        mark("load_ended")
        for j, (handle, port) in enumerate(servers):
            path = run_dir / f"server-{j}.stats-after.txt"
            path.write_text(server_stats(host.address, port))
            files["servers"][j]["stats_after"] = rel(path)
        client_totals = [_check_bench(host, h, json_out, settings["max_error_rate"]) for h, json_out in benches]
        record["clients_throughput"] = sum(t.get("ops_per_sec", 0.0) for t in client_totals)

        # 5. stop: middlewares first (they write summary.json on SIGTERM), then the servers
        for handle, _, stats_dir in middlewares:
            if host.poll(handle) is not None:
                raise RunFailed(f"{handle.name} exited with status {handle.returncode} during the run "
                                f"(log: {handle.log_path})")
            status = host.stop(handle, grace=15.0)
            if host.fetch(stats_dir / "summary.json", stats_dir / "summary.json") is None:
                raise RunFailed(f"{handle.name} wrote no summary.json (exit status {status}; log: {handle.log_path})")
        mark("middlewares_stopped")
        # memcached holds nothing worth a graceful exit (its stats are saved), and that exit
        # takes it most of a second: SIGKILL.
        for handle, _ in servers:
            host.stop(handle, grace=5.0, sig=signal.SIGKILL)
        mark("servers_stopped")
    except ProcessFailed as failure:
        raise RunFailed(str(failure)) from None
    except OSError as failure:  # a server that stopped answering `stats`, a full disk, ...
        raise RunFailed(f"{type(failure).__name__}: {failure}") from None
    finally:
        interrupted = signals is not None and signals.stopping
        host.stop_many(handles, grace=2.0 if interrupted else 5.0)  # all at once; a no-op after success
        record["processes"] = [h.as_dict() for h in handles]


def _wait_all(host: Host, clients: list[ProcessHandle], timeout: float, services: list[ProcessHandle],
              ticker=None) -> None:
    """Wait for every client to exit while the ``services`` they need stay up.

    Fails fast: a service that exits, or a client that exits non-zero while others still run.
    """
    deadline = time.monotonic() + timeout
    while True:
        running = [c for c in clients if host.poll(c) is None]
        for client in clients:
            if client.returncode not in (None, 0):
                raise RunFailed(f"{client.name} exited with status {client.returncode}{log_tail(client.log_path)} "
                                f"(log: {client.log_path})")
        if not running:
            return
        for service in services:
            if host.poll(service) is not None:
                raise RunFailed(f"{service.name} exited with status {service.returncode} while "
                                f"{running[0].name} was running{log_tail(service.log_path)} (log: {service.log_path})")
        if time.monotonic() > deadline:
            raise RunFailed(f"{running[0].name} did not finish within {timeout:.0f} s (log: {running[0].log_path})")
        if ticker:
            ticker()
        host.wait(running[0], 0.2)


def _check_bench(host: Host, handle: ProcessHandle, json_out: Path, max_error_rate: float,
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


# ---------------------------------------------------------------- manifest and resume


def _pending_record(run: Run) -> dict:
    return {
        "id": run.id,
        "configuration": run.configuration.index,
        "repetition": run.repetition,
        "parameters": run.configuration.parameters(),
        "dir": f"runs/{run.id}",
        "status": "pending",
    }


def _same_configuration(record: dict, config: Configuration) -> bool:
    return record.get("parameters") == json.loads(json.dumps(config.parameters()))


def _files_exist(out: Path, record: dict) -> bool:
    files = record.get("files") or {}
    paths = [c["json"] for c in files.get("clients", [])] + [m["summary"] for m in files.get("middlewares", [])]
    return bool(paths) and all((out / path).is_file() for path in paths)


def _previous_manifest(out: Path, resume: bool) -> dict | None:
    path = out / MANIFEST
    if not path.exists():
        return None
    if not resume:
        raise ResultsExist(f"{out} already holds results ({MANIFEST}); add --resume to continue them "
                           "or give another --out")
    try:
        return json.loads(path.read_text())
    except ValueError as error:
        raise ResultsExist(f"{path} is not readable JSON ({error}); move it away to start over") from None


def _check_same_experiment(previous: dict | None, experiment: Experiment, out: Path) -> None:
    if previous is None:
        return
    before = previous.get("experiment", {})
    if (before.get("name"), before.get("profile")) != (experiment.name, experiment.profile):
        profile = lambda p: f" (profile {p})" if p else ""  # noqa: E731
        raise ResultsExist(
            f"{out} holds results of {before.get('name')}{profile(before.get('profile'))}, not of "
            f"{experiment.name}{profile(experiment.profile)}; give another --out"
        )


def _write_manifest(out: Path, manifest: dict) -> None:
    manifest["summary"] = _count(manifest["runs"])
    temporary = out / (MANIFEST + ".tmp")
    temporary.write_text(json.dumps(manifest, indent=1, default=str))
    os.replace(temporary, out / MANIFEST)


def _count(records: list[dict]) -> dict[str, int]:
    counts = {"runs": len(records), "completed": 0, "failed": 0, "interrupted": 0, "pending": 0, "running": 0}
    for record in records:
        counts[record["status"]] = counts.get(record["status"], 0) + 1
    counts["skipped_on_resume"] = sum(1 for r in records if r.get("skipped_on_resume"))
    return counts


def _git_facts() -> dict[str, Any]:
    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": git("rev-parse", "HEAD"), "dirty": bool(status) if status is not None else None,
            "branch": git("rev-parse", "--abbrev-ref", "HEAD")}


def _machine_facts() -> dict[str, Any]:
    memory = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory = int(line.split()[1]) * 1024
    except OSError:
        pass
    cpu_model = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "hostname": platform.node(),
        "cores": os.cpu_count(),
        "cores_available": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cpu_model": cpu_model,
        "memory_bytes": memory,
        "kernel": platform.release(),
        "system": platform.system(),
        "platform": platform.platform(),
    }


# ---------------------------------------------------------------- signals


class _SignalGuard:
    """Turns the first SIGINT/SIGTERM into Interrupted; ignores the ones during cleanup."""

    def __init__(self) -> None:
        self.stopping = False

    def _handler(self, signum: int, frame: Any) -> None:
        if self.stopping:
            return
        self.stopping = True
        raise Interrupted(signum)

    @contextmanager
    def installed(self) -> Iterator[None]:
        previous = {sig: signal.signal(sig, self._handler) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


@contextmanager
def _nothing() -> Iterator[None]:
    yield


# ---------------------------------------------------------------- progress


class _Progress:
    """Progress on stderr: one plain line per run (fine for CI logs); a live ticker on a terminal."""

    def __init__(self, stream: IO[str], runs: list[Run], records: list[dict], experiment: Experiment):
        self.stream = stream
        self.runs = runs
        self.records = records
        self.total = len(runs)
        self.tty = hasattr(stream, "isatty") and stream.isatty()
        self.overheads: list[float] = []
        self._ticked = False
        swept = experiment.swept
        self.write(
            f"memrelay-lab: {experiment.name}"
            + (f" (profile {experiment.profile})" if experiment.profile else "")
            + f": {len({r.configuration.index for r in runs})} configurations x "
            f"{experiment.settings['repetitions']} repetitions = {self.total} runs"
            + (f"; varying {', '.join(swept)}" if swept else "")
            + f"; about {_duration(self.remaining(0))}"
        )

    def write(self, line: str) -> None:
        if self._ticked:
            self.stream.write("\r\033[K")
            self._ticked = False
        self.stream.write(line + "\n")
        self.stream.flush()

    def remaining(self, done_upto: int) -> float:
        overhead = sum(self.overheads) / len(self.overheads) if self.overheads else _OVERHEAD_GUESS_S
        return sum(
            run.configuration.test_time + overhead
            for run, record in zip(self.runs[done_upto:], self.records[done_upto:])
            if not record.get("skipped_on_resume")
        )

    def starting(self, number: int, run: Run) -> None:
        self.write(f"[run {number}/{self.total}] {run.id} rep {run.repetition}: {run.configuration.label()}  "
                   f"({_duration(self.remaining(number - 1))} left)")

    def skipped(self, number: int, run: Run) -> None:
        self.write(f"[run {number}/{self.total}] {run.id}: already completed, skipped (resume)")

    def tick(self, load_started: float, test_time: float) -> None:
        if not self.tty:
            return
        elapsed = min(time.time() - load_started, test_time)
        self.stream.write(f"\r\033[K    load {elapsed:4.0f} / {test_time:g} s")
        self.stream.flush()
        self._ticked = True

    def tick_done(self) -> None:
        if self._ticked:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self._ticked = False

    def finished(self, number: int, run: Run, record: dict) -> None:
        wall = record.get("wall_s", 0.0)
        if record["status"] == "completed":
            self.overheads.append(max(wall - run.configuration.test_time, 0.0))
            self.write(f"[run {number}/{self.total}] {run.id} completed in {wall:.1f} s: "
                       f"{record.get('clients_throughput', 0.0):,.0f} ops/s at the clients")
        else:
            self.write(f"[run {number}/{self.total}] {run.id} FAILED after {wall:.1f} s: {record.get('reason')}")

    def summary(self, summary: ExperimentSummary, status: str) -> None:
        prefix = f"memrelay-lab: {status}; " if status in ("interrupted", "aborted") else "memrelay-lab: "
        self.write(prefix + summary.describe())


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"

