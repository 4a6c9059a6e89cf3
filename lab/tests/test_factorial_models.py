"""Additive against multiplicative 2^k r fits, against Jain Example 18.1/18.2 (memory-cache study)."""

import math

import pandas as pd
import pytest

from types import SimpleNamespace

from memrelay_lab.analysis import compare_models, extreme_design, extreme_designs, extreme_levels, fits_of

# Jain Table 18.1: (A, B) -> three repetitions; q0 = 41, qA = 21.5, qB = 9.5, qAB = 5, SSE = 102.
JAIN_18_1 = {(-1, -1): (15, 18, 12), (1, -1): (45, 48, 51), (-1, 1): (25, 28, 19), (1, 1): (75, 75, 81)}


def _frame(cells):
    return pd.DataFrame([{"A": a, "B": b, "y": y} for (a, b), ys in cells.items() for y in ys])


def test_extreme_levels_drop_middle_level():
    data = pd.DataFrame({"A": [1, 2, 3, 1, 3], "B": [0, 0, 0, 5, 5], "y": [1, 2, 3, 4, 5]})
    assert extreme_levels(data, ["A", "B"])["y"].tolist() == [1, 3, 4, 5]


def test_jain_example_18_1_additive_fit():
    data = _frame(JAIN_18_1)
    # a middle level of A that the extreme-level reduction must drop
    data = pd.concat([data, pd.DataFrame({"A": [0, 0], "B": [-1, 1], "y": [1000, 1000]})])
    additive, multiplicative, better = compare_models(data, ["A", "B"], "y")
    assert additive.result.effects["A"] == pytest.approx(21.5)
    assert additive.result.effects["B"] == pytest.approx(9.5)
    assert additive.result.effects["AB"] == pytest.approx(5.0)
    # s_e = sqrt(SSE / (2^2 (3 - 1))) = sqrt(102 / 8); largest effect 21.5
    assert additive.relative_spread == pytest.approx(math.sqrt(102 / 8) / 21.5)
    assert sorted(additive.residuals.tolist()) == sorted([0, 3, -3, -3, 0, 3, 1, 4, -5, -2, -2, 4])
    assert better in ("additive", "multiplicative")


def test_multiplicative_data_prefer_log_model():
    # y = 10 * 2^a * 5^b times a small multiplicative error: exactly additive in log y.
    noise = (0.95, 1.0, 1.05)
    cells = {(a, b): tuple(10 * 2 ** (a > 0) * 5 ** (b > 0) * n for n in noise) for a in (-1, 1) for b in (-1, 1)}
    _, _, better = compare_models(_frame(cells), ["A", "B"], "y")
    assert better == "multiplicative"


def _summary(rows, swept):
    return SimpleNamespace(swept=swept, runs=pd.DataFrame(rows))


def test_extreme_design_of_a_three_level_factor():
    # servers 3, 5, 7 x writes 1, 10 (seed 002 §4), two repetitions: the design keeps 3 and 7.
    rows = [{"servers": s, "write_fraction": w, "clients": 8, "throughput": 1000.0 * s + w + r}
            for s in (3, 5, 7) for w in (0.01, 0.1) for r in (0, 1)]
    design, reason = extreme_design(_summary(rows, ["servers", "write_fraction"]))
    assert reason == "" and design.factors == ("servers", "write_fraction")
    assert design.levels == {"servers": (3, 7), "write_fraction": (0.01, 0.1)}
    assert design.replications == 2 and len(design.runs) == 8


def test_extreme_design_needs_every_corner_twice():
    rows = [{"servers": s, "workers": w, "throughput": 1.0} for s in (3, 7) for w in (8, 32)]
    design, reason = extreme_design(_summary(rows, ["servers", "workers"]))
    assert design is None and "r ≥ 2" in reason
    design, reason = extreme_design(_summary(rows, ["servers"]))
    assert design is None and "fewer than two" in reason


# Seed 002 §4 (sign table of §4.2): full replication, servers 3/7 x writes 1 %/10 %, three
# repetitions; y = 12224 - 729 xA - 434 xB + 41 xA xB.
SEED_002_TPS = {(3, "1:99"): (13584, 13140, 13560), (7, "1:99"): (11860, 11644, 12160),
                (3, "10:90"): (12742, 12622, 12070), (7, "10:90"): (10986, 11296, 11024)}


def _effect_of_writes_rows():
    """effect-of-writes.toml's grid: servers 3/5/7 x workload 1:99/5:95/10:90 x replication
    none/full, three repetitions; the seed's throughputs at the extreme corners of full."""
    rows = []
    for replication in ("none", "full"):
        for s in (3, 5, 7):
            for workload in ("1:99", "5:95", "10:90"):
                for r in range(3):
                    tps = SEED_002_TPS.get((s, workload))
                    if replication == "none" or tps is None:
                        tps = (20000 + 100 * s + r,) * 3  # not in the seed's design
                    rows.append({"servers": s, "workload": workload, "replication": replication,
                                 "throughput": float(tps[r]), "response_ms": 360 / tps[r] * 1000})
    return rows


def test_effect_of_writes_gives_seed_002_section_4_design():
    designs, reason = extreme_designs(_summary(_effect_of_writes_rows(), ["servers", "workload", "replication"]))
    assert reason == ""
    assert [d.where for d in designs] == [{"replication": "full"}, {"replication": "none"}]
    full = designs[0]
    assert full.factors == ("servers", "workload") and full.replications == 3
    assert full.levels == {"servers": (3, 7), "workload": ("1:99", "10:90")}
    additive, _, _ = fits_of(full, "throughput")
    effects = additive.result.effects
    assert [effects[e] for e in additive.result.effect_names] == pytest.approx([12224, -729, -434, 41])


def test_named_workloads_slice_one_design_each():
    # factorial-2k.toml: servers 2/3 x middlewares 1/2 x workers 8/32 for each of three named
    # workloads, two repetitions; y = base(workload) + 10 xs + 5 xm + 2 xw +- 1.
    base = {"write-only": 1000.0, "read-only": 3000.0, "50-50": 2000.0}
    rows = [{"servers": s, "middlewares": m, "workers": w, "workload": name,
             "throughput": b + 10 * (1 if s == 3 else -1) + 5 * (1 if m == 2 else -1) + 2 * (1 if w == 32 else -1)
             + (1 if r else -1)}
            for name, b in base.items() for s in (2, 3) for m in (1, 2) for w in (8, 32) for r in (0, 1)]
    designs, _ = extreme_designs(_summary(rows, ["servers", "middlewares", "workers", "workload"]))
    assert sorted(d.where["workload"] for d in designs) == sorted(base)
    for design in designs:
        assert design.replications == 2 and len(design.runs) == 16  # not 3 x 2 pooled
        effects = fits_of(design, "throughput")[0].result.effects
        assert effects["I"] == pytest.approx(base[design.where["workload"]])
        assert [effects[f] for f in ("servers", "middlewares", "workers")] == pytest.approx([10, 5, 2])


def test_two_level_categorical_is_a_factor_when_one_ordered_factor_varies():
    rows = [{"multiget": k, "sharded": sharded, "throughput": 100.0 + k + 50 * sharded + r}
            for k in (1, 3, 9) for sharded in (False, True) for r in (0, 1)]
    designs, reason = extreme_designs(_summary(rows, ["multiget", "sharded"]))
    assert reason == "" and len(designs) == 1 and designs[0].factors == ("multiget", "sharded")
    assert designs[0].levels == {"multiget": (1, 9), "sharded": ("False", "True")}


def test_population_folded_into_one_client_count_is_no_factor():
    # factorial-2k-1-3-servers.toml: instances x threads swap with the middlewares, 192 clients
    rows = [{"servers": s, "middlewares": m, "workers": w, "clients": 192, "throughput": 10.0 * s + m + w + r}
            for s in (1, 3) for m in (1, 2) for w in (8, 32) for r in (0, 1)]
    designs, reason = extreme_designs(_summary(rows, ["servers", "middlewares", "workers", "instances_per_machine"]))
    assert reason == "" and designs[0].factors == ("servers", "middlewares", "workers")
