"""The M/M/1 tables against seed 000 Table 22 (λ and μ of five configurations, P(≥ 5) and
P(≥ 10) jobs in the system), and the measured variance of response time beside the models
(Table 31)."""

import math

import pandas as pd
import pytest

from memrelay_lab.analysis import mm_tables

# Seed 000 Table 22: ρ per virtual-client count, P(≥ 5) and P(≥ 10) as printed. The table's
# λ and μ are rounded to whole requests per second, so λ is taken as its printed ρ times μ.
MU = 7021.0
SEED = {1: (0.25614, 0.0011, 0.0), 4: (0.97611, 0.88613, 0.78523), 10: (0.97371, 0.87528, 0.76611),
        16: (0.996, 0.98014, 0.96068), 32: (0.99468, 0.9737, 0.94809)}


def _table(std_ms=0.25):
    service_ms = 1e3 / MU  # one worker: μ = 1/S
    rows = []
    for clients, (rho, _, _) in SEED.items():
        lam = rho * MU
        rows.append({
            "clients": clients, "middlewares": 1, "workers": 1, "throughput": lam, "response_ms": 1.0,
            "mw_throughput": lam, "mw_response_ms": 0.5, "mw_queue_ms": 0.5 - service_ms, "mw_service_ms": 0.1,
            "mw_queue_length": 1.0, "mw_response_std_ms": std_ms,
        })
    return pd.DataFrame(rows)


def test_prob_at_least_k_jobs_rows_match_seed_table_22():
    tables = mm_tables(_table(), config_columns=["clients"])
    mm1 = tables.mm1
    for clients, (_, at_least_5, at_least_10) in SEED.items():
        rows = mm1[mm1["clients"] == clients].set_index("metric")["value"]
        assert rows["Prob. of ≥ 5 jobs in system"] == pytest.approx(at_least_5, abs=6e-5)
        assert rows["Prob. of ≥ 10 jobs in system"] == pytest.approx(at_least_10, abs=6e-5)


def test_measured_variance_sits_beside_the_models():
    comparison = mm_tables(_table(std_ms=0.3), config_columns=["clients"]).comparison
    assert comparison["var_response_ms2_measured"].tolist() == pytest.approx([0.09] * len(SEED))
    # M/M/1 variance of response time: 1 / (μ - λ)² (seed 000 Table 21), in ms².
    lam = SEED[1][0] * MU
    expected = (1e3 / (MU - lam)) ** 2
    assert comparison.loc[comparison["clients"] == 1, "var_response_ms2_mm1"].item() == pytest.approx(expected)
    without = mm_tables(_table().drop(columns="mw_response_std_ms"), config_columns=["clients"]).comparison
    assert math.isnan(without["var_response_ms2_measured"].iloc[0])


# Seed 000 Tables 22 (M/M/1) and 27 (M/M/8), 8 worker threads in each of TWO middlewares
# (§4, the full system): the seed's λ is the total throughput (6,854 ops/s at VC = 4) and
# μ = 7,021 ops/s the highest total it observed, μ / 8 = 877.67656 per worker for M/M/8.
# Per VC: ρ, M/M/1 mean response (ms), M/M/1 mean jobs in system, M/M/8 mean response (ms),
# M/M/8 mean jobs in queue, M/M/8 probability of queueing, all as printed. μ is taken from
# Table 27's five-decimal rate per worker (Table 22 prints it rounded, 7,021), λ = ρ μ.
PEAK = 8 * 877.67656
TABLE_22_27 = {1: (0.25614, 0.19146, 0.34434, 1.13963, 0.00046, 0.00134),
               4: (0.97611, 5.96214, 40.86265, 6.64802, 37.75457, 0.92394),
               10: (0.97371, 5.41712, 37.03582, 6.10388, 33.9414, 0.91645),
               16: (0.996, 35.57137, 248.76123, 36.25002, 245.5393, 0.98705),
               32: (0.99468, 26.7887, 187.09454, 27.46783, 183.88018, 0.98282)}


def _two_middlewares():
    rows = []
    for clients, (rho, *_rest) in TABLE_22_27.items():
        lam = rho * PEAK  # total over both middlewares
        rows.append({"clients": clients, "middlewares": 2, "workers": 8, "throughput": lam, "response_ms": 3.0,
                     "mw_throughput": lam, "mw_throughput_max": PEAK if clients == 16 else lam,
                     "mw_response_ms": 2.7, "mw_queue_ms": 0.5, "mw_service_ms": 2.1, "mw_queue_length": 1.8})
    return pd.DataFrame(rows)


def test_peak_rule_takes_the_seeds_total_rates_for_two_middlewares():
    tables = mm_tables(_two_middlewares(), service_rate="peak", config_columns=["clients"])
    comparison = tables.comparison.set_index("clients")
    for clients, (rho, r_mm1, n_mm1, r_mmm, nq_mmm, queueing) in TABLE_22_27.items():
        row = comparison.loc[clients]
        assert row["arrival_rate"] == pytest.approx(rho * PEAK)
        assert row["service_rate_per_worker"] == pytest.approx(877.67656, abs=5e-6)
        assert row["traffic_intensity"] == pytest.approx(rho, abs=5e-6)
        assert bool(row["stable"])
        # ρ is printed with five decimals and R, n scale with 1 / (1 - ρ): at ρ = 0.996 its
        # last digit (± 5e-6) moves them by 0.13 %.
        assert row["response_ms_mm1"] == pytest.approx(r_mm1, rel=1.5e-3)
        assert row["jobs_in_system_mm1"] == pytest.approx(n_mm1, rel=1.5e-3)
        assert row["response_ms_mmm"] == pytest.approx(r_mmm, rel=1.5e-3)
        assert row["queue_length_mmm"] == pytest.approx(nq_mmm, rel=1.5e-3, abs=6e-6)
        assert row["queue_length_measured"] == pytest.approx(2 * 1.8)  # both middlewares' queues
        wide = tables.mmm[tables.mmm["clients"] == clients].set_index("metric")["value"]
        assert wide["Prob. of queueing"] == pytest.approx(queueing, abs=2e-5)


def test_peak_rule_without_the_highest_repetition_takes_the_highest_mean():
    # Without mw_throughput_max the peak is the highest mean (VC = 16's 6,993): that
    # configuration has ρ = 1, no steady state, and the others are scaled by 7,021 / 6,993.
    table = _two_middlewares().drop(columns="mw_throughput_max")
    comparison = mm_tables(table, service_rate="peak", config_columns=["clients"]).comparison.set_index("clients")
    assert comparison.loc[16, "traffic_intensity"] == pytest.approx(1.0)
    assert not comparison.loc[16, "stable"]
    assert comparison.loc[4, "traffic_intensity"] == pytest.approx(0.97611 / 0.996, abs=1e-5)
