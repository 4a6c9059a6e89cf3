"""2^k r factorial designs against seed 000 Tables 7-10, seed 002 section 4, Jain's
chapter 18 example, t tables, and designs built from known effects."""

import itertools
import json
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memrelay_lab import FactorialDesignError, factorial_design, factorial_from_responses, read_factorial_csv

# Seed 000 Table 7: write-only throughput (ops/s), rows in standard order, r = 3.
# A: servers 2/3, B: middlewares 1/2, C: worker threads 8/32.
TABLE_7_THROUGHPUT = [
    [13739, 13680, 13921],
    [11658, 12287, 12634],
    [19988, 19762, 19853],
    [17201, 17215, 17460],
    [24067, 23864, 22620],
    [19992, 19753, 20098],
    [29427, 29225, 28439],
    [24990, 25286, 25046],
]
# Table 7's last row (q_x) and Table 8's percentages of variation.
TABLE_7_EFFECTS = {"I": 20092, "A": -1457, "B": 2733, "C": 4309,
                   "AB": -167.74, "AC": -416.24, "BC": -64.29, "ABC": 79.43}  # fmt: skip
TABLE_8_PERCENT = {"A": 7.46, "B": 26.23, "C": 65.21, "AB": 0.1, "AC": 0.61, "BC": 0.01, "ABC": 0.02}
TABLE_8_ERROR_PERCENT = 0.36
TABLE_8_SS = {"SSY": 1.04e10, "SS0": 9.69e9, "SST": 6.83e8, "A": 5.09e7, "B": 1.79e8, "C": 4.46e8, "AB": 675_300,
              "AC": 4.16e6, "BC": 99_183, "ABC": 151_408, "Errors": 2.47e6}  # fmt: skip

# Seed 000 Table 9: write-only response time (ms), same design.
TABLE_9_RESPONSE_TIME = [
    [14.16, 14.23, 13.95],
    [16.6, 15.75, 15.33],
    [10.0, 10.07, 10.06],
    [11.53, 11.53, 11.32],
    [8.56, 8.66, 9.09],
    [10.1, 10.17, 10.03],
    [7.5, 7.61, 7.76],
    [8.59, 8.56, 8.63],
]
TABLE_9_EFFECTS = {"I": 10.82, "A": 0.69, "B": -1.39, "C": -2.05, "AB": -0.09, "AC": -0.11, "BC": 0.73, "ABC": 0.0}
TABLE_10_PERCENT = {"A": 6.52, "B": 26.87, "C": 58.26, "AB": 0.11, "AC": 0.17, "BC": 7.42, "ABC": 0.0}
TABLE_10_ERROR_PERCENT = 0.65
TABLE_10_SS = {"SSY": 2986, "SS0": 2812, "SST": 173.62, "A": 11.31, "B": 46.65, "C": 101.15, "AB": 0.2, "AC": 0.3,
               "BC": 12.87, "ABC": 0.0, "Errors": 1.13}  # fmt: skip

# Seed 002 section 4: 2^2 3, A: servers 3/7, B: writes 1%/10%, throughput (TPS).
SEED_002_TPS = [[13584, 13140, 13560], [11860, 11644, 12160], [12742, 12622, 12070], [10986, 11296, 11024]]


def test_seed_000_table_7_and_8_throughput():
    # The seed's inputs are printed rounded to integers, so its effects differ from the
    # ones recomputed from the printed inputs in the second decimal (AB: -167.79 vs -167.74).
    result = factorial_from_responses(TABLE_7_THROUGHPUT)
    assert result.effect_names == ("I", "A", "B", "C", "AB", "AC", "BC", "ABC")
    for name, expected in TABLE_7_EFFECTS.items():
        assert result.effects[name] == pytest.approx(expected, abs=0.6), name
    for name, expected in TABLE_8_PERCENT.items():
        assert result.variation_percent[name] == pytest.approx(expected, abs=0.006), name
    assert result.error_percent == pytest.approx(TABLE_8_ERROR_PERCENT, abs=0.006)
    table = result.variation_frame()["sum_of_squares"]
    for component, expected in TABLE_8_SS.items():
        assert table[component] == pytest.approx(expected, rel=5e-3), component


def test_seed_000_table_9_and_10_response_time():
    result = factorial_from_responses(TABLE_9_RESPONSE_TIME)
    for name, expected in TABLE_9_EFFECTS.items():
        assert result.effects[name] == pytest.approx(expected, abs=0.005), name
    # Printed inputs have two decimals; percentages come out within 0.05 points.
    for name, expected in TABLE_10_PERCENT.items():
        assert result.variation_percent[name] == pytest.approx(expected, abs=0.05), name
    assert result.error_percent == pytest.approx(TABLE_10_ERROR_PERCENT, abs=0.05)
    # SSE is the sum of 24 squared residuals of about 0.2 ms, and the inputs' second
    # decimal is rounded: it comes out 1.117 against the table's 1.13.
    table = result.variation_frame()["sum_of_squares"]
    for component, expected in TABLE_10_SS.items():
        assert table[component] == pytest.approx(expected, rel=1.5e-2, abs=0.01), component


def test_seed_000_table_7_sign_table_and_frame_shape():
    result = factorial_from_responses(TABLE_7_THROUGHPUT)
    # Table 7's sign columns I A B C AB AC BC ABC, row by row.
    expected_signs = [
        [1, -1, -1, -1, 1, 1, 1, -1],
        [1, 1, -1, -1, -1, -1, 1, 1],
        [1, -1, 1, -1, -1, 1, -1, 1],
        [1, 1, 1, -1, 1, -1, -1, -1],
        [1, -1, -1, 1, 1, -1, -1, 1],
        [1, 1, -1, 1, -1, 1, -1, -1],
        [1, -1, 1, 1, -1, -1, 1, -1],
        [1, 1, 1, 1, 1, 1, 1, 1],
    ]
    assert result.sign_table.tolist() == expected_signs
    frame = result.sign_table_frame()
    assert list(frame.columns) == ["I", "A", "B", "C", "AB", "AC", "BC", "ABC", "y_1", "y_2", "y_3", "y_mean"]
    assert len(frame) == 9
    # Table 7's ybar column, printed as integers (from unrounded measurements, so +/- 1).
    assert frame["y_mean"].iloc[:8].tolist() == pytest.approx(
        [13780, 12193, 19868, 17292, 23517, 19947, 29030, 25107], abs=1
    )
    assert frame.loc["q", "A"] == pytest.approx(result.effects["A"])
    variation = result.variation_frame()
    assert list(variation.index) == ["SSY", "SS0", "SST", "A", "B", "C", "AB", "AC", "BC", "ABC", "Errors"]
    assert variation["variation_percent"].iloc[3:].sum() == pytest.approx(100.0)


def test_seed_002_section_4_exact():
    # All of seed 002's numbers are exact integers for these inputs.
    result = factorial_from_responses(SEED_002_TPS)
    assert result.effects == {"I": 12224.0, "A": -729.0, "B": -434.0, "AB": 41.0}
    assert result.sse == pytest.approx(573_080)
    assert result.sst == pytest.approx(9_230_816)
    assert result.sum_of_squares["A"] == pytest.approx(6_377_292)
    assert result.sum_of_squares["B"] == pytest.approx(2_260_272)
    assert result.sum_of_squares["AB"] == pytest.approx(20_172)
    assert result.variation_percent["A"] == pytest.approx(69.09, abs=0.005)
    assert result.variation_percent["B"] == pytest.approx(24.49, abs=0.005)
    assert result.variation_percent["AB"] == pytest.approx(0.22, abs=0.005)
    assert result.error_percent == pytest.approx(6.2, abs=0.01)
    # Seed 002's error table: e_i1..e_i3 per row.
    assert result.residuals.tolist() == [[156, -288, 132], [-28, -244, 272], [264, 144, -408], [-116, 194, -78]]


def test_jain_chapter_18_example_with_confidence_intervals():
    # Jain ch. 18's 2^2 3 example (memory-cache study). By hand: ybar = 15, 48, 24, 77;
    # q0 = 164/4 = 41, qA = 86/4 = 21.5, qB = 38/4 = 9.5, qAB = 20/4 = 5;
    # SSA = 12 * 21.5^2 = 5547, SSB = 1083, SSAB = 300, SSE = 18 + 18 + 42 + 24 = 102,
    # SST = 7032. s_e = sqrt(102 / 8) = 3.57, s_q = s_e / sqrt(12) = 1.03.
    # 90 % CI: t[0.95; 8] = 1.860 (t table), half width 1.92, every effect significant.
    responses = [[15, 18, 12], [45, 48, 51], [25, 28, 19], [75, 75, 81]]
    result = factorial_from_responses(responses, level=0.90)
    assert result.effects == {"I": 41.0, "A": 21.5, "B": 9.5, "AB": 5.0}
    assert result.sse == pytest.approx(102)
    assert result.sst == pytest.approx(7032)
    assert result.variation_percent["A"] == pytest.approx(78.88, abs=0.005)
    assert result.degrees_of_freedom == 8
    assert result.t_quantile == pytest.approx(1.860, abs=5e-4)
    assert result.error_std == pytest.approx(3.57, abs=5e-3)
    assert result.effect_std == pytest.approx(1.03, abs=5e-3)
    low, high = result.confidence_intervals["AB"]
    assert (low, high) == pytest.approx((5 - 1.92, 5 + 1.92), abs=5e-3)
    assert all(result.significant.values())


def test_confidence_intervals_use_t_with_2k_r_minus_1_degrees_of_freedom():
    # Seed 000 Table 7: 2^3 (3 - 1) = 16 degrees of freedom; t[0.975; 16] = 2.120.
    result = factorial_from_responses(TABLE_7_THROUGHPUT)
    assert result.degrees_of_freedom == 16
    assert result.t_quantile == pytest.approx(2.120, abs=5e-4)
    assert result.effect_std == pytest.approx(math.sqrt(result.sse / 16) / math.sqrt(24))
    # By hand: s_e = sqrt(2473742.67 / 16) = 393.2, s_q = 393.2 / sqrt(24) = 80.26, half
    # width 2.120 * 80.26 = 170.2. So AB (-167.8), BC (-64.2) and ABC (79.4) include 0,
    # while AC (-416.2), although only 0.61 % of the variation, does not.
    half = result.confidence_intervals["BC"][1] - result.effects["BC"]
    assert half == pytest.approx(170.2, abs=0.1)
    assert {name for name, flag in result.significant.items() if not flag} == {"AB", "BC", "ABC"}


def test_seed_002_interaction_is_not_significant():
    # s_e = sqrt(573080 / 8) = 267.65, s_q = 77.26, t[0.975; 8] = 2.306: AB = 41 +/- 178.2.
    result = factorial_from_responses(SEED_002_TPS)
    low, high = result.confidence_intervals["AB"]
    assert (low, high) == pytest.approx((41 - 178.2, 41 + 178.2), abs=0.1)
    assert result.significant == {"I": True, "A": True, "B": True, "AB": False}


def test_multiplicative_model_recovers_known_log_effects():
    # log10 y = 2 + 0.3 xA - 0.1 xB + 0.05 xA xB, repetitions +/- 0.01 around it.
    rows = []
    for i in range(4):
        xa, xb = (1 if i & 1 else -1), (1 if i & 2 else -1)
        centre = 2 + 0.3 * xa - 0.1 * xb + 0.05 * xa * xb
        rows.append([10 ** (centre - 0.01), 10 ** (centre + 0.01)])
    result = factorial_from_responses(rows, log=True)
    assert result.effects == pytest.approx({"I": 2.0, "A": 0.3, "B": -0.1, "AB": 0.05})
    assert result.multiplicative_effects["A"] == pytest.approx(10**0.3)
    assert result.sse == pytest.approx(4 * 2 * 0.01**2)
    assert "multiplicative_effect" in result.effects_frame().columns
    with pytest.raises(FactorialDesignError, match="positive"):
        factorial_from_responses([[1, 2], [0, 1]], log=True)


@st.composite
def designs(draw):
    """Responses built from chosen effects plus errors that average 0 in every row."""
    k = draw(st.integers(min_value=1, max_value=5))
    r = draw(st.integers(min_value=1, max_value=4))
    effects = draw(st.lists(st.integers(-1000, 1000), min_size=2**k, max_size=2**k))
    errors = draw(st.lists(st.integers(-50, 50), min_size=2**k * r, max_size=2**k * r))
    return k, r, np.array(effects, dtype=float), np.array(errors, dtype=float).reshape(2**k, r)


@settings(max_examples=60, deadline=None)
@given(designs())
def test_any_k_recovers_known_effects(design):
    k, r, q, errors = design
    errors -= errors.mean(axis=1, keepdims=True)
    # Effect columns in the module's order: I, main effects, then interactions by order.
    columns = [c for order in range(k + 1) for c in itertools.combinations(range(k), order)]
    x = np.array([[1 if (i >> f) & 1 else -1 for f in range(k)] for i in range(2**k)])
    signs = np.array([[np.prod(x[i, list(c)]) for c in columns] for i in range(2**k)])
    responses = (signs @ q)[:, None] + errors
    result = factorial_from_responses(responses)
    assert [result.effects[name] for name in result.effect_names] == pytest.approx(q, abs=1e-7)
    assert result.sse == pytest.approx(np.sum(errors**2), abs=1e-6)
    explained = sum(result.sum_of_squares[name] for name in result.effect_names[1:])
    assert explained + result.sse == pytest.approx(result.sst, rel=1e-9, abs=1e-6)
    if r == 1:
        assert math.isnan(result.effect_std) and not any(result.significant.values())


def _seed_000_frame():
    """Table 7 as a run table with named levels, rows shuffled."""
    records = []
    for row, values in enumerate(TABLE_7_THROUGHPUT):
        for y in values:
            records.append(
                {
                    "servers": (2, 3)[row & 1],
                    "middlewares": ("one", "two")[(row >> 1) & 1],
                    "workers": (8, 32)[(row >> 2) & 1],
                    "throughput": y,
                }
            )
    return pd.DataFrame(records).sample(frac=1.0, random_state=7)


def test_run_table_with_named_levels_gives_the_same_analysis():
    frame = _seed_000_frame()
    result = factorial_design(frame, ["servers", "middlewares", "workers"], "throughput")
    reference = factorial_from_responses(TABLE_7_THROUGHPUT)
    assert result.effect_names == ("I", "servers", "middlewares", "workers", "servers:middlewares",
                                   "servers:workers", "middlewares:workers", "servers:middlewares:workers")  # fmt: skip
    assert list(result.effects.values()) == pytest.approx(list(reference.effects.values()))
    assert result.levels == {"servers": (2, 3), "middlewares": ("one", "two"), "workers": (8, 32)}
    flipped = factorial_design(frame, ["servers", "middlewares", "workers"], "throughput", levels={"servers": (3, 2)})
    assert flipped.effects["servers"] == pytest.approx(-reference.effects["A"])
    record = json.loads(json.dumps(result.to_dict()))
    assert record["levels"]["middlewares"] == {"low": "one", "high": "two"}
    assert record["effects"]["servers"]["q"] == pytest.approx(reference.effects["A"])


def test_read_factorial_csv(tmp_path):
    path = tmp_path / "runs.csv"
    _seed_000_frame().to_csv(path, index=False)
    result = read_factorial_csv(path, ["servers", "middlewares", "workers"], "throughput", level=0.99)
    assert result.effects["workers"] == pytest.approx(4308.708333, abs=1e-5)
    assert result.level == 0.99


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (pd.DataFrame({"A": [-1, 1, -1], "y": [1.0, 2.0, 3.0]}), "same number of runs"),
        (pd.DataFrame({"A": [1, 2, 3, 1], "y": [1.0, 2.0, 3.0, 4.0]}), "exactly two levels"),
        (pd.DataFrame({"A": [-1, 1], "y": ["1.0", "fast"]}), "non-numeric"),
        (pd.DataFrame({"A": [-1, 1], "z": [1.0, 2.0]}), "missing column"),
    ],
)
def test_malformed_designs_are_rejected(frame, message):
    with pytest.raises(FactorialDesignError, match=message):
        factorial_design(frame, ["A"], "y")


def test_missing_combination_is_named():
    frame = pd.DataFrame({"A": [-1, 1, -1], "B": [-1, -1, 1], "y": [1.0, 2.0, 3.0]})
    with pytest.raises(FactorialDesignError, match=r"\(A=1, B=1\): 0"):
        factorial_design(frame, ["A", "B"], "y")


# Seed 000 Tables 11-20 (§6.3-6.4): the read-only and 50-50 designs, every factor. Each entry:
# the y_ij of the Results table, its q_x row, the Variations table's sums of squares and
# percentages (Errors included), and the tolerances the printed rounding allows: the
# throughputs are printed as integers (q within 0.6), the response times with two decimals
# (q within 0.005 plus the table's own rounding to two decimals).
SEED_000_DESIGNS = {
    "T11-12 read-only throughput": dict(
        y=[(22099, 21648, 20857), (20050, 20095, 21245), (22275, 22267, 22262), (33364, 33328, 33364),
           (22253, 22310, 22280), (32345, 31891, 31000), (22223, 22258, 22266), (33356, 33350, 33448)],
        q={"I": 25910, "A": 3827, "B": 1904, "C": 1505, "AB": 1728, "AC": 1323, "BC": -1502, "ABC": -1311},
        ss={"SSY": 1.68e10, "SS0": 1.61e10, "SST": 7.05e8, "A": 3.51e8, "B": 8.70e7, "C": 5.44e7, "AB": 7.17e7,
            "AC": 4.20e7, "BC": 5.41e7, "ABC": 4.12e7, "Errors": 2.65e6},
        percent={"A": 49.88, "B": 12.35, "C": 7.72, "AB": 10.18, "AC": 5.97, "BC": 7.68, "ABC": 5.85, "Errors": 0.38},
        q_abs=0.6, percent_abs=0.006, ss_rel=5e-3),
    "T13-14 read-only response time": dict(
        y=[(8.98, 9.16, 9.53), (9.85, 9.91, 9.29), (9.46, 9.37, 9.35), (6.19, 6.18, 6.17),
           (9.53, 9.24, 9.33), (6.91, 6.96, 7.8), (10.45, 10.53, 10.49), (6.53, 6.5, 6.64)],
        q={"I": 8.52, "A": -1.1, "B": -0.36, "C": -0.11, "AB": -0.68, "AC": -0.41, "BC": 0.47, "ABC": 0.24},
        ss={"SSY": 1796, "SS0": 1740, "SST": 55.61, "A": 29.28, "B": 3.1, "C": 0.27, "AB": 11.18, "AC": 4.12,
            "BC": 5.39, "ABC": 1.34, "Errors": 0.94},
        percent={"A": 52.66, "B": 5.57, "C": 0.48, "AB": 20.1, "AC": 7.4, "BC": 9.69, "ABC": 2.4, "Errors": 1.7},
        # SSA = 24 q_A²: the inputs' rounding (± 0.005 ms each) moves q_A = -1.104 by about
        # 0.001, SSA by 0.05 and its share by 0.09 points (29.24 here, 29.28 in the seed);
        # SSE, 24 squared residuals of rounded inputs, comes out 0.956 against 0.94.
        q_abs=0.01, percent_abs=0.1, ss_rel=2e-2),
    "T15-16 50-50 throughput": dict(
        y=[(16998, 16937, 17115), (16052, 15268, 15515), (23674, 23860, 23877), (22620, 22538, 22360),
           (26663, 25310, 27222), (25482, 25026, 24455), (33417, 34316, 32638), (30588, 32002, 30576)],
        q={"I": 24355, "A": -814.45, "B": 3351, "C": 4620, "AB": -110.46, "AC": -138.72, "BC": -69.47,
           "ABC": -137.34},
        ss={"SSY": 1.50e10, "SS0": 1.42e10, "SST": 8.05e8, "A": 1.59e7, "B": 2.69e8, "C": 5.12e8, "AB": 292_818,
            "AC": 461_871, "BC": 115_810, "ABC": 452_724, "Errors": 5.61e6},
        percent={"A": 1.98, "B": 33.49, "C": 63.67, "AB": 0.04, "AC": 0.06, "BC": 0.01, "ABC": 0.06, "Errors": 0.7},
        q_abs=0.6, percent_abs=0.006, ss_rel=5e-3),
    "T17-18 50-50 write response time": dict(
        y=[(11.66, 11.67, 11.53), (12.31, 12.93, 12.72), (8.82, 8.73, 8.78), (9.28, 9.34, 9.35),
           (8.1, 8.44, 8.06), (8.6, 8.65, 8.88), (7.28, 7.05, 7.21), (7.73, 7.58, 7.81)],
        q={"I": 9.27, "A": 0.33, "B": -1.02, "C": -1.32, "AB": -0.06, "AC": -0.07, "BC": 0.52, "ABC": 0.06},
        ss={"SSY": 2140, "SS0": 2064, "SST": 76.92, "A": 2.56, "B": 25.19, "C": 41.99, "AB": 0.08, "AC": 0.11,
            "BC": 6.49, "ABC": 0.1, "Errors": 0.4},
        percent={"A": 3.33, "B": 32.74, "C": 54.6, "AB": 0.1, "AC": 0.15, "BC": 8.43, "ABC": 0.12, "Errors": 0.52},
        q_abs=0.01, percent_abs=0.05, ss_rel=1.5e-2),
    "T19-20 50-50 read response time": dict(
        y=[(11.49, 11.49, 11.34), (12.02, 12.64, 12.43), (8.44, 8.35, 8.39), (8.7, 8.77, 8.79),
           (7.75, 8.01, 7.69), (7.98, 8.03, 8.17), (6.6, 6.37, 6.68), (6.85, 6.52, 6.86)],
        q={"I": 8.76, "A": 0.22, "B": -1.16, "C": -1.47, "AB": -0.08, "AC": -0.1, "BC": 0.51, "ABC": 0.06},
        ss={"SSY": 1936, "SS0": 1843, "SST": 92.3, "A": 1.11, "B": 32.04, "C": 52.0, "AB": 0.14, "AC": 0.26,
            "BC": 6.22, "ABC": 0.1, "Errors": 0.43},
        percent={"A": 1.21, "B": 34.71, "C": 56.34, "AB": 0.15, "AC": 0.28, "BC": 6.74, "ABC": 0.11, "Errors": 0.46},
        q_abs=0.01, percent_abs=0.05, ss_rel=1.5e-2),
}


@pytest.mark.parametrize("name", list(SEED_000_DESIGNS))
def test_seed_000_tables_11_to_20_every_factor(name):
    seed = SEED_000_DESIGNS[name]
    result = factorial_from_responses(seed["y"])
    for factor, expected in seed["q"].items():
        assert result.effects[factor] == pytest.approx(expected, abs=seed["q_abs"]), (name, factor)
    for factor, expected in seed["percent"].items():
        ours = result.error_percent if factor == "Errors" else result.variation_percent[factor]
        assert ours == pytest.approx(expected, abs=seed["percent_abs"]), (name, factor)
    table = result.variation_frame()["sum_of_squares"]
    for component, expected in seed["ss"].items():
        # Sums of squares printed with three significant digits (or two decimals).
        assert table[component] == pytest.approx(expected, rel=seed["ss_rel"], abs=0.01), (name, component)


# Seed 004 §6, its example sign table (write-only throughput, A: middlewares 1/2, B: servers
# 1/3, C: worker threads 8/32, rows in standard order): y_mean and the errors e1..e3, so the
# repetitions are y_mean + e_j. Its additive (tab:2k-add-wo-tpt) and multiplicative
# (tab:2k-mult-wo-tpt, natural logarithm) results, as printed: effect, fraction of variation.
SEED_004_MEANS = [3364.3, 4318.9, 2655.2, 3729.6, 5832.8, 7321.3, 4786.4, 6782.0]
SEED_004_ERRORS = [(45.56, -15.33, -30.23), (-19.85, -1.77, 21.63), (23.47, 37.06, -60.54), (9.09, -39.41, 30.32),
                   (6.49, -17.43, 10.93), (17.68, -21.73, 4.04), (27.09, -18.71, -8.38), (-16.40, -2.95, 19.35)]
SEED_004_ADDITIVE = {"A": (689.1529, 0.196), "B": (-360.4905, 0.054), "C": (1331.8182, 0.731), "AB": (78.3606, 0.003),
                     "BC": (-35.9031, 0.001), "AC": (181.8770, 0.014), "ABC": (48.4125, 0.001)}
SEED_004_MULTIPLICATIVE = {"A": (0.1457, 0.194), "B": (-0.0822, 0.062), "C": (0.2832, 0.733), "AB": (0.0264, 0.006),
                           "BC": (0.0137, 0.002), "AC": (-0.0017, 0.000), "ABC": (0.0039, 0.000)}


def _seed_004_responses():
    return [[mean + e for e in errors] for mean, errors in zip(SEED_004_MEANS, SEED_004_ERRORS)]


def _explained_share(result, name):
    """A factor's share of the variation the factors explain (SST - SSE): the seed's error share
    (its commented-out row: 0.002 of SST, additive; 0.003 multiplicative) is about 8 times what
    its own printed errors give (0.026 %), so its fractions are those of a slightly larger SST;
    as shares of the explained variation the seed's and the lab's agree to the seed's digits."""
    return result.variation_percent[name] / (100 - result.error_percent)


def test_seed_004_additive_model_write_only_throughput():
    result = factorial_from_responses(_seed_004_responses())
    for name, (effect, fraction) in SEED_004_ADDITIVE.items():
        # y_mean printed with one decimal, the errors with two: effects within 0.05.
        assert result.effects[name] == pytest.approx(effect, abs=0.05), name
        assert _explained_share(result, name) == pytest.approx(fraction / (1 - 0.002), abs=6e-4), name


def test_seed_004_multiplicative_model_write_only_throughput():
    # The lab fits log10 y (its report shows 10^q); the seed's logarithm is the natural one:
    # q_ln = q_log10 ln 10. Fractions of variation do not depend on the base.
    data = pd.DataFrame([{"A": a, "B": b, "C": c, "y": y}
                         for i, ys in enumerate(_seed_004_responses())
                         for a, b, c in [((-1, 1)[i & 1], (-1, 1)[i >> 1 & 1], (-1, 1)[i >> 2 & 1])]
                         for y in ys])
    result = factorial_design(data, ["A", "B", "C"], "y", log=True)
    for name, (effect, fraction) in SEED_004_MULTIPLICATIVE.items():
        assert result.effects[name] * math.log(10) == pytest.approx(effect, abs=6e-5), name
        assert _explained_share(result, name) == pytest.approx(fraction / (1 - 0.003), abs=6e-4), name
