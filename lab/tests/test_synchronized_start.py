"""The load generators of a run begin their load at one instant (issue 22): conftest's shared
real run (`loaders_results`: three runs of six benches, three client machines on loopback),
each bench told the same ``--start-at``.

The start times checked come from each bench's own JSON (when its load began) and from the
lab's process records (when each was launched), not from the lab's arithmetic; the check
"Load generators ran together" passes on the run and fails on a copy with one bench's start
moved by one second.
"""

import json
import shutil
from pathlib import Path

import pytest

from memrelay_lab import load
from memrelay_lab.analysis import checks_frame, consistency_checks
from memrelay_lab.experiment import BinaryNotFound, find_binaries
from memrelay_lab.experiment._start_time import MAX_MARGIN_S, on_host_clock, start_margin

try:
    BINARIES = find_binaries()
except BinaryNotFound as missing:
    pytest.skip(f"needs the programs: {missing}", allow_module_level=True)

CHECK = "Load generators ran together"


@pytest.fixture(scope="module")
def together(loaders_results) -> Path:
    """conftest's shared run: three runs of six benches (three client machines of two
    instances), started one after the other, 2 s of load each."""
    return loaders_results


def _verdicts(folder: Path) -> list[tuple[str, float, str]]:
    frame = checks_frame(consistency_checks(load(folder)))
    rows = frame[frame["check"] == CHECK]
    return [(row["verdict"], row["value"], row["detail"]) for _, row in rows.iterrows()]


def test_every_bench_waits_for_the_one_start_time(together):
    manifest = json.loads((together / "manifest.json").read_text())
    assert len(manifest["runs"]) == 3
    for record in manifest["runs"]:
        start_at = record["load_start_at_unix"]
        launched = {p["name"]: p["started_unix"] for p in record["processes"]}
        assert len(record["files"]["clients"]) == 6
        for client in record["files"]["clients"]:
            bench = json.loads((together / client["json"]).read_text())
            name = Path(client["json"]).stem
            # One host, the lab's clock: every bench got the same instant, after its own launch.
            assert client["start_at_unix"] == pytest.approx(start_at, abs=1e-6)
            assert bench["config"]["start_at_unix_s"] == pytest.approx(start_at, abs=1e-6)
            assert launched[name] < start_at, f"{name} was launched after the load was to begin"
            # The bench's own clock: its load began at the instant, not at its launch.
            assert bench["start_unix_s"] >= start_at
        # The launches were spread over time, the loads were not.
        assert record["load_start_spare_s"] > 0


def test_the_overlap_check_passes_and_fails_on_a_doctored_copy(together, tmp_path):
    verdicts = _verdicts(together)
    assert len(verdicts) == 3  # one per run
    for verdict, value, detail in verdicts:
        assert verdict == "pass", detail
        assert value >= 0.9 and "6 load generators" in detail

    # In the first run, one bench whose load began one second after the others (as when starts
    # were not synchronized): its kept interval covers half of the others' 2 s. The other runs
    # still pass.
    copy = tmp_path / "doctored"
    shutil.copytree(together, copy)
    moved = sorted((copy / "runs").glob("*/client-2-1.json"))
    assert len(moved) == 3
    bench = json.loads(moved[0].read_text())
    bench["start_unix_s"] += 1.0
    moved[0].write_text(json.dumps(bench))
    verdicts = _verdicts(copy)
    failed = [row for row in verdicts if row[0] != "pass"]
    assert len(verdicts) == 3 and len(failed) == 1, verdicts
    ((verdict, value, detail),) = failed
    assert verdict == "FAIL", detail
    assert value == pytest.approx(1 / 2, abs=0.05)
    assert "mix different moments" in detail


def test_the_margin_grows_with_the_starts_and_stays_bounded():
    assert start_margin(1, 0) < start_margin(6, 0) < start_margin(0, 6)
    # Six loaders over SSH took 2.4 s on a loaded machine (issue 22): the margin covers that.
    assert start_margin(0, 6) > 2.4
    assert start_margin(0, 1000) == MAX_MARGIN_S < 60  # memrelay-bench refuses more than 60 s ahead
    with pytest.raises(ValueError):
        start_margin(-1, 0)
    # Host minus lab (`_environment`): a host 2 s ahead shows the lab's 100.0 as 102.0.
    assert on_host_clock(100.0, 2.0) == 102.0
