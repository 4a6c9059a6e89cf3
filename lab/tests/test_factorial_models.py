"""Additive against multiplicative 2^k r fits, against Jain Example 18.1/18.2 (memory-cache study)."""

import math

import pandas as pd
import pytest

from types import SimpleNamespace

from memrelay_lab.analysis import compare_models, extreme_design, extreme_levels

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
