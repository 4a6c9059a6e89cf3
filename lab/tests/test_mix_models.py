"""M/M/1 and M/M/m with the mix's service rate and m = servers (seed 002 §1-2): the inputs by
hand, and p0 and the probability of queueing against seed 002 Table 2."""

import math

import pandas as pd
import pytest

from memrelay_lab.analysis import mix_models

# Seed 002 Tables 1-2: (servers, ρ) -> (p0, probability of queueing), as printed.
SEED_002 = {(3, 0.8486): (0.04, 0.728), (3, 0.9585): (0.01, 0.923), (5, 0.4962): (0.081, 0.127),
            (5, 0.6514): (0.035, 0.305), (7, 0.3698): (0.075, 0.018), (7, 0.5076): (0.028, 0.081)}


def _row(servers=2, workers=4, lam=1000.0, get_ms=(1.0, 0.2), set_ms=(3.0, 0.5), gets=900.0, sets=100.0):
    return {
        "clients": 8, "servers": servers, "workers": workers, "middlewares": 1, "engine": "pool",
        "mw_throughput": lam, "mw_throughput_get": gets, "mw_throughput_multiget": 0.0, "mw_throughput_set": sets,
        "mw_response_get_ms": get_ms[0], "mw_queue_get_ms": get_ms[1],
        "mw_response_set_ms": set_ms[0], "mw_queue_set_ms": set_ms[1],
        "mw_response_ms": 1.2, "mw_queue_ms": 0.23, "mw_queue_length": 0.5, "mw_in_system": 1.2,
    }


def test_inputs_by_hand():
    # E[s]: get 0.8 ms, set 2.5 ms; 10% sets: 0.9*0.8 + 0.1*2.5 = 0.97 ms, μ_mix = 1/0.97 ms.
    frame = mix_models(pd.DataFrame([_row()]), ["clients"])
    row = frame.iloc[0]
    assert row["read_service_ms"] == pytest.approx(0.8) and row["set_service_ms"] == pytest.approx(2.5)
    assert row["write_share"] == pytest.approx(0.1)
    assert row["mix_service_rate"] == pytest.approx(1000 / 0.97)
    assert row["service_rate_per_server"] == pytest.approx(2 * 1000 / 0.97)  # 4 workers over 2 servers
    assert row["traffic_intensity"] == pytest.approx(1000 / (4 * 1000 / 0.97))
    # M/M/1 of rate 4 μ_mix: R = 1 / (μ - λ)
    assert row["response_ms_mm1"] == pytest.approx(1e3 / (4 * 1000 / 0.97 - 1000))
    assert row["jobs_in_system_measured"] == 1.2 and row["waiting_ms_measured"] == 0.23


@pytest.mark.parametrize(("servers", "rho"), list(SEED_002))
def test_erlang_probabilities_match_seed_002_table_2(servers, rho):
    workers = servers  # one worker per server: μ per server = μ_mix
    mu_mix = 1000 / 0.97
    frame = mix_models(pd.DataFrame([_row(servers=servers, workers=workers, lam=rho * servers * mu_mix)]), ["clients"])
    p0, queueing = SEED_002[(servers, rho)]
    row = frame.iloc[0]
    assert row["traffic_intensity"] == pytest.approx(rho)
    assert row["prob_zero_jobs_mmm"] == pytest.approx(p0, abs=0.0011)
    assert row["prob_queueing_mmm"] == pytest.approx(queueing, abs=0.0011)


def test_unstable_and_unmodelled_configurations():
    frame = mix_models(pd.DataFrame([_row(lam=5000.0), {**_row(), "engine": "evented"}]), ["clients"])
    assert len(frame) == 1  # the evented engine has no worker pool to model
    assert math.isnan(frame.iloc[0]["response_ms_mmm"])
    assert mix_models(pd.DataFrame([_row()]).drop(columns="mw_queue_get_ms"), ["clients"]) is None
