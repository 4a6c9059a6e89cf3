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
