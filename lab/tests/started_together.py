"""What a run's records must say about its load generators' start, whatever the machine's speed
(issue 49): shared by the one-host and the testbed tests.

A busy machine may launch a bench after the instant its load was to begin; the bench then begins
at once, the run records a negative spare, and the overlap check judges how far apart the loads
began. So these assertions read the records against each other, never against the clock:
- every bench was told the one instant (on its own host's clock), and its load never began
  before it;
- the spare the lab recorded is what the launch records leave (the instant minus the last
  launch, measured after it);
- the check "Load generators ran together" agrees with an overlap computed here from the benches'
  own start times, not with the lab's windows.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memrelay_lab import load
from memrelay_lab.analysis import checks_frame, consistency_checks
from memrelay_lab.analysis._checks import LOADERS_OVERLAP

CHECK = "Load generators ran together"


def assert_start_records(folder: Path, record: dict, offsets: dict[str, float]) -> list[dict]:
    """Checks one run's records (``manifest["runs"][i]``); returns its benches' JSONs."""
    start_at = record["load_start_at_unix"]
    launched = {p["name"]: p["started_unix"] for p in record["processes"]}
    benches = []
    for client in record["files"]["clients"]:
        bench = json.loads((folder / client["json"]).read_text())
        on_host = start_at + offsets.get(client.get("host"), 0.0)
        assert client["start_at_unix"] == pytest.approx(on_host, abs=1e-6)
        assert bench["config"]["start_at_unix_s"] == pytest.approx(on_host, abs=1e-6)
        # The bench's own clock: its load began at the instant, never before it.
        assert bench["start_unix_s"] >= client["start_at_unix"]
        benches.append(bench)
    last_launch = max(launched[Path(c["json"]).stem] for c in record["files"]["clients"])
    assert record["load_start_spare_s"] <= start_at - last_launch + 1e-3
    if record["load_start_spare_s"] > 0:
        assert all(launched[Path(c["json"]).stem] < start_at for c in record["files"]["clients"])
    return benches


def overlap_from_starts(benches: list[dict], offsets: list[float], kept_s: float) -> float:
    """The part of a kept interval of ``kept_s`` every bench covered, from their load start
    times alone (each on the lab's clock once its host's offset is taken out)."""
    starts = [b["start_unix_s"] - offset for b, offset in zip(benches, offsets)]
    return max(kept_s - (max(starts) - min(starts)), 0.0) / kept_s


def together_verdicts(folder: Path) -> list[tuple[str, float, str]]:
    frame = checks_frame(consistency_checks(load(folder)))
    rows = frame[frame["check"] == CHECK]
    return [(row["verdict"], row["value"], row["detail"]) for _, row in rows.iterrows()]


def assert_verdict_agrees(verdict: str, value: float, detail: str, independent: float) -> None:
    """The check's value is the overlap of the kept windows; the one computed from the start
    times alone may differ by part of a window, so within 0.1 of the bound only the value is
    compared."""
    assert value == pytest.approx(independent, abs=0.1), detail
    if independent >= LOADERS_OVERLAP + 0.1:
        assert verdict == "pass", detail
    elif independent < LOADERS_OVERLAP - 0.1:
        assert verdict == "FAIL", detail
