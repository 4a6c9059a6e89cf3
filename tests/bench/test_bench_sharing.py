"""scripts/bench_sharing.py: its table and summaries on made-up runs, and the script itself in its
quickest mode against memrelay (evented, one thread) only, once as it runs and once with an RSS
limit below the target's own so that the attacker's cap is exercised. Nothing here is timed: how
the honest clients fare is the bench's to report, not a test's. About 10 s."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

import bench_sharing  # noqa: E402
from benchlib import human  # noqa: E402

BIN = Path(os.environ.get("MEMRELAY_BIN_DIR", REPO / "target" / "release"))
TARGET = "memrelay-evented/1"


def made_up(throughput: float, p99: float | None, unanswered: int = 0, peak: int = 6 << 20, **extra) -> dict:
    return {"throughput": throughput, "p99_us": p99, "answered": 10_000, "unanswered": unanswered,
            "peak_rss_bytes": peak, "rss_end_bytes": peak} | extra


def test_summary_ratios_stalls_and_caps():
    runs = {"quiet": [made_up(40_000, 500), made_up(42_000, 520), made_up(38_000, 480)],
            "attacked": [made_up(20_000, 5_000, peak=3 << 30, hostile_closed=3),
                         made_up(22_000, None, unanswered=900, peak=4 << 30, hostile_closed=5, capped_after_s=1.5),
                         made_up(10_000, 9_000, unanswered=500, peak=4 << 30, hostile_closed=4, capped_after_s=0.5)]}
    s = bench_sharing.summarize(runs, 4 << 30)
    assert s["quiet"]["throughput"] == 40_000 and s["quiet"]["p99_us"] == 500 and not s["quiet"]["stalled"]
    assert s["throughput_ratio"] == pytest.approx(0.5)
    # Two of three attacked runs left more than 1% of their requests unanswered: no p99, stalled.
    assert s["attacked"]["stalled"] and s["attacked"]["p99_us"] is None and s["p99_ratio"] is None
    assert s["attacked"]["unanswered"] == 1_400
    assert s["attacked"]["hostile_closed"] == 4
    assert s["attacked"]["capped_runs"] == 2 and s["attacked"]["capped_after_s"] == pytest.approx(1.0)
    assert bench_sharing.effective_p99(made_up(1, 700, unanswered=100)) == 700  # 1%: still a p99
    assert math.isinf(bench_sharing.effective_p99(made_up(1, 700, unanswered=103)))


def test_table_is_for_people():
    runs = {"quiet": [made_up(17_534.2, 512.0)],
            "attacked": [made_up(8_765.4, 23_456.0, peak=4_400_000_000, hostile_closed=12_345, capped_after_s=0.8)]}
    rows = [{"row": "64 not reading", "connections": 64, "mode": "never",
             "targets": {TARGET: {"summary": bench_sharing.summarize(runs, 4 << 30), "runs": runs},
                         "memcached-proxy": {"cannot": "absent: set MEMCACHED_PROXY"}}}]
    text = "\n".join(bench_sharing.table_lines(rows, [TARGET, "memcached-proxy", "twemproxy"]))
    assert "e+" not in text and "e-" not in text
    line = next(line for line in text.splitlines() if line.startswith("64 not reading") and TARGET in line)
    for piece in ("17,534", "8,765", "0.50", "512 µs", "23.5 ms", "45.8", "≥4 GiB (capped 1×, 0.8 s)", "12,345"):
        assert piece in line, (piece, line)
    assert "absent: set MEMCACHED_PROXY" in text and "twemproxy" not in text
    assert human.micros(4_000_000) == "4.0 s" and human.micros(None) == "-"
    assert [bench_sharing.ratio_text(v) for v in (0, 0.0001, 0.62, 4_947.6, None)] == ["0", "<0.01", "0.62", "4,948", "-"]


def run_script(out: Path, *extra: str) -> tuple[dict, str]:
    env = dict(os.environ, MEMRELAY_BIN_DIR=str(BIN))
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "bench_sharing.py"), "--quick", "--targets", TARGET,
                           "--out", str(out), *extra], check=True, env=env, timeout=120, capture_output=True,
                          text=True)
    return json.loads((out / "sharing.json").read_text()), done.stdout


def test_quick_run_against_memrelay(tmp_path):
    result, stdout = run_script(tmp_path, "--connections", "8", "--modes", "never,slow")
    assert [r["row"] for r in result["rows"]] == ["8 not reading", "8 reading 1 KB/100 ms"]
    for row in result["rows"]:
        cell = row["targets"][TARGET]
        assert "cannot" not in cell, cell
        s = cell["summary"]
        # Beside the attacker the honest clients may get nothing (a stalled run): that is the
        # bench's finding, not a failure; alone they must be served.
        assert s["quiet"]["throughput"] > 0 and s["attacked"]["throughput"] >= 0
        assert s["quiet"]["peak_rss_bytes"] > 0 and s["attacked"]["peak_rss_bytes"] > 0
        assert not s["quiet"]["stalled"] and s["quiet"]["p99_us"] > 0
        assert s["attacked"]["hostile_closed"] >= 0 and s["attacked"]["capped_runs"] == 0
        assert len(cell["runs"]["quiet"]) == len(cell["runs"]["attacked"]) == 1
    assert "8 not reading" in stdout and "e+" not in stdout


def test_the_attack_stops_at_the_rss_limit(tmp_path):
    # A limit below any memrelay's own RSS: the attacker closes its connections at its first look.
    result, stdout = run_script(tmp_path, "--connections", "1", "--modes", "never", "--rss-limit", str(1 << 20))
    attacked = result["rows"][0]["targets"][TARGET]["summary"]["attacked"]
    assert attacked["capped_runs"] == 1 and attacked["capped_after_s"] < 5
    assert "≥1 MiB (capped 1×" in stdout
