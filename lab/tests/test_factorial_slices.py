"""Which parameters are a 2^k r design's factors and which slice it into designs: every
categorical parameter slices, whatever its number of values (seeds 003/004 §6 analyse the
read-only and the write-only workload apart), ordered ones with two values are factors (seed
002 §4's 1 % and 10 % writes), in the order of their quantity."""

from types import SimpleNamespace

import pandas as pd
import pytest

from memrelay_lab.analysis import factorial_factors, factorial_results

SEED_002_TPS = {(3, "1:99"): (13584, 13140, 13560), (7, "1:99"): (11860, 11644, 12160),
                (3, "10:90"): (12742, 12622, 12070), (7, "10:90"): (10986, 11296, 11024)}


def _summary(cells, swept):
    """cells: {((parameter, value), ...): the repetitions' throughputs}."""
    table, runs = [], []
    for configuration, (pairs, ys) in enumerate(cells.items()):
        values = dict(pairs)
        table.append({**values, "configuration": configuration, "throughput": sum(ys) / len(ys),
                      "repetitions": len(ys)})
        runs += [{**values, "configuration": configuration, "throughput": y, "response_ms": 1e6 / y} for y in ys]
    return SimpleNamespace(swept=swept, table=pd.DataFrame(table), runs=pd.DataFrame(runs), level=0.95)


def test_two_valued_workload_slices_seed_003_004_section_6():
    # servers 1/3 x middlewares 1/2 x workers 8/32, read-only and write-only, r = 3:
    # y = base + 100 xs + 10 xm + 1 xw (+- 0.5), base 5000 (reads) or 2000 (writes).
    base = {"read-only": 5000.0, "write-only": 2000.0}
    cells = {}
    for workload, b in base.items():
        for s in (1, 3):
            for m in (1, 2):
                for w in (8, 32):
                    y = b + 100 * (1 if s == 3 else -1) + 10 * (1 if m == 2 else -1) + (1 if w == 32 else -1)
                    cells[(("servers", s), ("middlewares", m), ("workers", w), ("workload", workload))] = (
                        y - 0.5, y, y + 0.5)
    summary = _summary(cells, ["servers", "middlewares", "workers", "workload"])
    plan, reason = factorial_factors(summary)
    assert plan.factors == ["servers", "middlewares", "workers"] and plan.slice_by == ["workload"]
    assert reason == "2^3 3 design for each workload (2 designs)"
    analyses = factorial_results(summary)
    for workload, b in base.items():
        result = analyses[f"throughput (requests/s), workload={workload}"]
        assert [result.effects[e] for e in ("I", "servers", "middlewares", "workers")] == pytest.approx(
            [b, 100, 10, 1])


def test_write_share_is_an_ordered_factor_of_seed_002_section_4():
    cells = {(("servers", s), ("workload", w)): ys for (s, w), ys in SEED_002_TPS.items()}
    summary = _summary(cells, ["servers", "workload"])
    plan, _ = factorial_factors(summary)
    assert plan.factors == ["servers", "workload"] and plan.slice_by == []
    result = factorial_results(summary)["throughput (requests/s)"]
    # Seed 002 §4.2: y = 12224 - 729 xA - 434 xB + 41 xA xB; "1:99" is the low level although
    # it sorts after "10:90" as text.
    assert [result.effects[e] for e in result.effect_names] == pytest.approx([12224, -729, -434, 41])


def test_two_valued_replication_slices():
    cells = {}
    for replication in ("none", "full"):
        for s in (3, 7):
            for w in ("1:99", "10:90"):
                cells[(("servers", s), ("workload", w), ("replication", replication))] = SEED_002_TPS[(s, w)]
    plan, reason = factorial_factors(_summary(cells, ["servers", "workload", "replication"]))
    assert plan.factors == ["servers", "workload"] and plan.slice_by == ["replication"], reason


def test_extreme_models_section_text_and_multiplicative_effects_come_from_the_design():
    import math

    from memrelay_lab.report._factorial_models_section import factorial_models_section

    # A design whose factors are clients and workers: the text names them, not seed 002's.
    cells = {}
    for clients in (8, 32):
        for workers in (8, 64):
            y = 1000.0 * (2 if clients == 32 else 1) * (1.5 if workers == 64 else 1)
            cells[(("clients", clients), ("workers", workers))] = (0.98 * y, y, 1.02 * y)
    section = factorial_models_section(_summary(cells, ["clients_per_thread", "workers"]))
    text = " ".join(section.text)
    assert "clients: 8 and 32; workers: 8 and 64" in text
    assert "servers 3 and 7" not in text and "writes" not in text
    table = next(item for item in section.items if getattr(item, "name", "") == "extreme_models_throughput")
    frame = table.frame
    multiplicative = frame[[c for c in frame.columns if c.startswith("multiplicative")][0]]
    effects = {row.split(": effect")[0]: value for row, value in multiplicative.items() if ": effect" in row}
    assert len(effects) == 3 and all(math.isfinite(v) for v in multiplicative)  # no "–" left
    # y doubles with the clients and grows 1.5 times with the workers: 10^q = sqrt of each.
    assert effects["clients"] == pytest.approx(2 ** 0.5, rel=1e-3)
    assert effects["workers"] == pytest.approx(1.5 ** 0.5, rel=1e-3)


def test_main_section_names_each_factors_low_and_high_level_in_order():
    from memrelay_lab.report._factorial_section import factorial_section

    cells = {(("servers", s), ("workload", w)): ys for (s, w), ys in SEED_002_TPS.items()}
    section = factorial_section(_summary(cells, ["servers", "workload"]))
    assert "servers: 3 and 7; workload: 1:99 and 10:90" in section.text[0]
