"""scripts/bench_memory.py end to end in its quick mode: every part runs against the real targets
(memcached, twemproxy, memrelay evented and pool; memcached's proxy when $MEMCACHED_PROXY names
one) and gives numbers that make sense. Nothing here is timed: how fast or how big is the
bench's to report, not a test's."""

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

from benchlib import bigreplies, human  # noqa: E402

BIN = Path(os.environ.get("MEMRELAY_BIN_DIR", REPO / "target" / "release"))


@pytest.fixture(scope="module")
def quick(tmp_path_factory) -> tuple[dict, Path]:
    out = tmp_path_factory.mktemp("bench-memory")
    env = dict(os.environ, BENCH_QUICK="1", MEMRELAY_BIN_DIR=str(BIN))
    subprocess.run([sys.executable, str(REPO / "scripts" / "bench_memory.py"), "--out", str(out)],
                   check=True, env=env, timeout=900, stdout=subprocess.DEVNULL)
    return json.loads((out / "memory.json").read_text()), out


def measured(cells: dict) -> dict:
    """The cells that have numbers; every target but memcached's proxy (absent without
    $MEMCACHED_PROXY, or a peer that cannot do a row) must have them."""
    for name, cell in cells.items():
        if "cannot" in cell:
            assert name == "memcached-proxy", (name, cell)
    return {name: cell for name, cell in cells.items() if "cannot" not in cell}


def test_cpu_rows_do_the_work_and_count_cpu(quick):
    result, _ = quick
    rows = {r["row"]: r for r in result["cpu"]}
    assert {"get 100 KiB", "set 100 KiB", "get 512 KiB", "set 512 KiB", "get 100 keys of 1 KiB"} <= set(rows)
    for row in rows.values():
        cells = measured(row["targets"])
        assert {"memcached", "twemproxy", "memrelay-pool"} <= set(cells)
        for name, cell in cells.items():
            assert cell["ops_per_sec"] > 0, (row["row"], name)
            assert cell["cpu_us_per_request"] >= 0 and math.isfinite(cell["cpu_us_per_request"]), (row["row"], name)
            assert cell["errors"] == 0 and cell["work_problems"] == [], (row["row"], name, cell["work_problems"])
            if name != "memcached":
                assert cell["ops_ratio"] > 0, (row["row"], name)


def test_idle_connections_give_rss_per_connection(quick):
    result, _ = quick
    assert [r["connections"] for r in result["idle"]] == [100, 300]
    for row in result["idle"]:
        for name, cell in measured(row["targets"]).items():
            # A sane figure: a few hundred connections share a target's first allocations (the pool
            # engine's showed ~0.3 MiB each at 100), but no target keeps megabytes per connection.
            assert abs(cell["bytes_per_connection"]) < 4 << 20, (row["connections"], name, cell)
            assert cell["baseline_bytes"] > 0


def test_large_replies_arrive_whole_and_memory_is_read(quick):
    result, _ = quick
    for part, key, size, times, connections in (("amplify", "amp", 1_000_000, 50, 1), ("big", "big", 20_000_000, 1, 5)):
        (row,) = result[part]
        cells = measured(row["targets"])
        assert {"memcached", "twemproxy", "memrelay-pool"} <= set(cells), part
        for name, cell in cells.items():
            for run in cell["runs"]:
                assert run["reply_bytes"] == connections * bigreplies.reply_length(key, size, times), (part, name)
                assert run["baseline_bytes"] > 0 and math.isfinite(run["kept_above_bytes"]), (part, name)
    (amplify,) = result["amplify"]
    assert all(r["request_bytes"] == len("get" + " amp" * 50 + "\r\n") for c in measured(amplify["targets"]).values()
               for r in c["runs"])


def test_figures_are_drawn(quick):
    _, out = quick
    pytest.importorskip("matplotlib")
    for name in ("cpu-vs-value-size.png", "cpu-vs-keys-per-get.png", "rss-per-idle-connection.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name


def test_numbers_are_printed_for_people():
    assert human.number(17_234.4) == "17,234"
    assert human.number(None) == "-"
    assert human.size(1536) == "1.5 KiB"
    assert human.size(512 * 1024) == "512 KiB"
    assert human.size(20_000_000) == "19.1 MiB"
    assert human.size(655) == "655 B"
