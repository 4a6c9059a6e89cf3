"""Running an experiment: the loop over its runs (the manifest, progress and signals have their own modules).

``run_experiment(experiment, out_dir)`` executes every run of ``plan(experiment)``, one
after the other (`_one_run` starts, measures and stops one run).

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

import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from ._environment import measure_environment
from ._expand import plan
from ._hosts import Host, HostError, LocalHost
from ._manifest import (
    FORMAT,
    ResultsExist,
    check_same_experiment,
    files_exist,
    git_facts,
    machine_facts,
    pending_record,
    previous_manifest,
    same_configuration,
    write_manifest,
)
from ._one_run import OneRun, RunFailed, execute_run
from ._preflight import connect_hosts
from ._binaries import Binaries, find_binaries, find_proxy
from ._processes import program_versions
from ._progress import Progress, duration
from ._roles import RoleHosts
from ._signals import Interrupted, SignalGuard, nothing
from ._spec import Experiment

__all__ = ["ExperimentSummary", "Interrupted", "ResultsExist", "default_out_dir", "run_experiment"]


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
            + f"; wall time {duration(self.wall_s)}; results in {self.out_dir}"
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

    The roles run on the experiment's ``[hosts]`` (connected and checked first, `_preflight`),
    else all on ``host`` (default: this machine).

    Raises SpecError for an impossible design, BinaryNotFound for a missing program,
    ResultsExist when ``out_dir`` holds results and ``resume`` is False, HostError (or
    TestbedUnavailable) when a host cannot be used, before anything starts, and Interrupted
    (after stopping everything) on SIGINT/SIGTERM when ``handle_signals`` is True.
    """
    runs = plan(experiment)  # validates the whole design before anything starts
    binaries = binaries or find_binaries()
    # Every other proxy the design runs, found before anything starts (BinaryNotFound says how to get it).
    for program in sorted({run.configuration.middleware for run in runs if run.configuration.middlewares} - {"memrelay"}):
        find_proxy(program)
    out = Path(out_dir) if out_dir is not None else default_out_dir(experiment)
    previous = previous_manifest(out, resume)
    check_same_experiment(previous, experiment, out)
    stream = progress if progress is not None else sys.stderr

    def say(line: str) -> None:
        print(line, file=stream, flush=True)

    if experiment.topology is not None and host is None:
        roles = connect_hosts(experiment.topology, out, binaries, say)  # preflight: nothing started yet
    else:
        roles = RoleHosts.local(host or LocalHost(), binaries)
    try:
        return _run_all(experiment, runs, out, previous, roles, binaries, stream, handle_signals, say)
    finally:
        for each in roles.all():
            each.stop_all(grace=2.0)
            try:
                each.remove_files()
            except HostError:
                pass  # a host that went away keeps its folder; its processes died with the connection
            each.close()


def _run_all(experiment: Experiment, runs: list, out: Path, previous: dict | None, roles: RoleHosts,
             binaries: Binaries, progress: IO[str], handle_signals: bool,
             say: Callable[[str], None]) -> ExperimentSummary:
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
        "git": git_facts(),
        "versions": program_versions(binaries),
        "binaries": {"memcached": binaries.memcached, "memrelay": binaries.memrelay, "memrelay-bench": binaries.bench},
        "machine": machine_facts(),
        "lab": {"python": sys.version.split()[0], "argv": sys.argv, "host": roles.all()[0].name},
        "topology": experiment.topology.as_dict() if experiment.topology else None,
        "started_unix": started,
        "ended_unix": None,
        "status": "running",
        "resumed_from": previous.get("started_unix") if previous else None,
    }
    old_runs = {record["id"]: record for record in (previous or {}).get("runs", [])}
    records: list[dict] = []
    for run in runs:
        old = old_runs.get(run.id)
        if old and old.get("status") == "completed" and same_configuration(old, run.configuration) \
                and files_exist(out, old):
            records.append({**old, "skipped_on_resume": True})
        else:
            records.append(pending_record(run))
    manifest["runs"] = records
    # The hosts, their clocks and the links between them, before any run (`_environment`).
    middlewares = [run.configuration.middlewares for run in runs]
    manifest["environment"] = measure_environment(roles, out / "environment", middlewares=max(middlewares) > 0,
                                                  baselines=min(middlewares) == 0, say=say)
    write_manifest(out, manifest)
    # The benches of a run begin at one instant, given to each on its host's clock (`_start_time`).
    clock_offsets = {name: float(facts.get("clock_offset_s") or 0.0)
                     for name, facts in manifest["environment"]["hosts"].items()}

    reporter = Progress(progress, runs, records, experiment)
    summary = ExperimentSummary(out, len(runs), 0, 0, 0, 0, 0.0)
    signals = SignalGuard() if handle_signals else None
    # The handlers stay installed through the cleanup below, so a second Ctrl-C cannot cut it short.
    with signals.installed() if signals else nothing():
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
                write_manifest(out, manifest)
                try:
                    one = OneRun(run, run_dir, out, record, roles, experiment.settings,
                                 ticker=reporter.tick, tick_done=reporter.tick_done, clock_offsets=clock_offsets)
                    execute_run(one, interrupted=lambda: signals is not None and signals.stopping)
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
                    write_manifest(out, manifest)
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
            for host in roles.all():
                host.stop_all(grace=2.0)
            manifest["ended_unix"] = time.time()
            write_manifest(out, manifest)
            summary.wall_s = time.time() - started
            reporter.summary(summary.describe(), manifest["status"])
    return summary
