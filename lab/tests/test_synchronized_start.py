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

from memrelay_lab.experiment import BinaryNotFound, find_binaries
from memrelay_lab.experiment._start_time import MAX_MARGIN_S, on_host_clock, start_margin
from started_together import assert_start_records, assert_verdict_agrees, overlap_from_starts, together_verdicts

try:
    BINARIES = find_binaries()
except BinaryNotFound as missing:
    pytest.skip(f"needs the programs: {missing}", allow_module_level=True)

KEPT_S = 2.0  # conftest's LOADERS_SPEC: 2 s of load, no warm-up or cool-down


@pytest.fixture(scope="module")
def together(loaders_results) -> Path:
    """conftest's shared run: three runs of six benches (three client machines of two
    instances), started one after the other, 2 s of load each."""
    return loaders_results


def _benches(folder: Path) -> list[list[dict]]:
    manifest = json.loads((folder / "manifest.json").read_text())
    return [assert_start_records(folder, record, {}) for record in manifest["runs"]]


def test_every_bench_waits_for_the_one_start_time(together):
    """Whatever the machine's speed: one instant for all, no load before it, the recorded spare
    what the launches left (a busy machine may launch a bench late; it then begins at once)."""
    runs = _benches(together)
    assert [len(benches) for benches in runs] == [6, 6, 6]


def test_the_overlap_check_passes_and_fails_on_a_doctored_copy(together, tmp_path):
    runs = _benches(together)
    verdicts = together_verdicts(together)
    assert len(verdicts) == 3  # one per run
    for (verdict, value, detail), benches in zip(verdicts, runs):
        assert "6 load generators" in detail
        assert_verdict_agrees(verdict, value, detail, overlap_from_starts(benches, [0.0] * 6, KEPT_S))

    # In the first run, one bench whose load began one second after the others' (as when starts
    # were not synchronized): the others covered about half of its 2 s, and the check says so.
    # The other runs keep their verdicts.
    copy = tmp_path / "doctored"
    shutil.copytree(together, copy)
    moved = sorted((copy / "runs").glob("*/client-2-1.json"))
    assert len(moved) == 3
    bench = json.loads(moved[0].read_text())
    bench["start_unix_s"] += 1.0
    moved[0].write_text(json.dumps(bench))
    doctored = together_verdicts(copy)
    assert doctored[1:] == verdicts[1:]
    (verdict, value, detail) = doctored[0]
    first = [json.loads(path.read_text()) for path in sorted(moved[0].parent.glob("client-*.json"))]
    assert len(first) == 6
    independent = overlap_from_starts(first, [0.0] * 6, KEPT_S)
    assert independent < 0.6  # at least 1 s apart out of 2
    assert_verdict_agrees(verdict, value, detail, independent)
    assert verdict == "FAIL" and "mix different moments" in detail


def test_the_margin_grows_with_the_starts_and_stays_bounded():
    assert start_margin(1, 0) < start_margin(6, 0) < start_margin(0, 6)
    # Six loaders over SSH took 2.4 s on a loaded machine (issue 22): the margin covers that.
    assert start_margin(0, 6) > 2.4
    assert start_margin(0, 1000) == MAX_MARGIN_S < 60  # memrelay-bench refuses more than 60 s ahead
    with pytest.raises(ValueError):
        start_margin(-1, 0)
    # Host minus lab (`_environment`): a host 2 s ahead shows the lab's 100.0 as 102.0.
    assert on_host_clock(100.0, 2.0) == 102.0
