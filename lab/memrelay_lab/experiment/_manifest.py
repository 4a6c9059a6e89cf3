"""A results folder's ``manifest.json``: the records of the runs, resuming, and the facts
(git commit, machine) written beside them.

The manifest is rewritten after every run (through a temporary file, so a reader never sees
half of it). Resuming keeps every run recorded as completed with the same configuration and
its files present.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

from ._expand import Configuration, Run
from ._binaries import REPO
from ._spec import Experiment

__all__ = [
    "FORMAT",
    "MANIFEST",
    "ResultsExist",
    "check_same_experiment",
    "files_exist",
    "git_facts",
    "machine_facts",
    "pending_record",
    "previous_manifest",
    "same_configuration",
    "write_manifest",
]

MANIFEST = "manifest.json"
FORMAT = "memrelay-lab-results/1"


class ResultsExist(RuntimeError):
    """The output folder already holds results and resuming was not asked for."""


def pending_record(run: Run) -> dict:
    return {
        "id": run.id,
        "configuration": run.configuration.index,
        "repetition": run.repetition,
        "parameters": run.configuration.parameters(),
        "dir": f"runs/{run.id}",
        "status": "pending",
    }


def same_configuration(record: dict, config: Configuration) -> bool:
    return record.get("parameters") == json.loads(json.dumps(config.parameters()))


def files_exist(out: Path, record: dict) -> bool:
    files = record.get("files") or {}
    paths = [c["json"] for c in files.get("clients", [])] + [m["summary"] for m in files.get("middlewares", [])]
    return bool(paths) and all((out / path).is_file() for path in paths)


def previous_manifest(out: Path, resume: bool) -> dict | None:
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


def check_same_experiment(previous: dict | None, experiment: Experiment, out: Path) -> None:
    if previous is None:
        return
    before = previous.get("experiment", {})
    if (before.get("name"), before.get("profile")) != (experiment.name, experiment.profile):
        profile = lambda p: f" (profile {p})" if p else ""  # noqa: E731
        raise ResultsExist(
            f"{out} holds results of {before.get('name')}{profile(before.get('profile'))}, not of "
            f"{experiment.name}{profile(experiment.profile)}; give another --out"
        )


def write_manifest(out: Path, manifest: dict) -> None:
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


def git_facts() -> dict[str, Any]:
    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": git("rev-parse", "HEAD"), "dirty": bool(status) if status is not None else None,
            "branch": git("rev-parse", "--abbrev-ref", "HEAD")}


def machine_facts() -> dict[str, Any]:
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
