"""Progress of an experiment on stderr: one plain line per run (fine for CI logs), a live
ticker during the load on a terminal, and an estimate of the time left."""

from __future__ import annotations

import time
from typing import IO

from ._expand import Run
from ._spec import Experiment

__all__ = ["Progress", "duration"]

# Seconds a run takes beyond its test time (start, populate, stop), until one was measured.
_OVERHEAD_GUESS_S = 1.0


class Progress:
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
            + f"; about {duration(self.remaining(0))}"
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
                   f"({duration(self.remaining(number - 1))} left)")

    def skipped(self, number: int, run: Run) -> None:
        self.write(f"[run {number}/{self.total}] {run.id}: already completed, skipped (resume)")

    def tick(self, load_started: float, test_time: float) -> None:
        if not self.tty:
            return
        elapsed = min(max(time.time() - load_started, 0.0), test_time)  # 0 until the load begins
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

    def summary(self, description: str, status: str) -> None:
        prefix = f"memrelay-lab: {status}; " if status in ("interrupted", "aborted") else "memrelay-lab: "
        self.write(prefix + description)


def duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
