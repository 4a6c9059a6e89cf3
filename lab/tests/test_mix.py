"""Service rate of a read/write mix, against hand computations."""

import math

import pytest

from memrelay_lab.theory._mix import mix_mm1, mix_mmm, mix_service_rate


def test_mix_service_rate_hand_case():
    # 90% gets at 1000/s (1 ms), 10% sets at 500/s (2 ms): mean 0.9*1 + 0.1*2 = 1.1 ms.
    assert mix_service_rate(0.9, 1000.0, 500.0) == pytest.approx(1000.0 / 1.1)
    assert mix_service_rate(1.0, 1000.0, 500.0) == pytest.approx(1000.0)
    assert mix_service_rate(0.0, 1000.0, 500.0) == pytest.approx(500.0)


def test_mix_mm1_hand_case():
    # mu = 1000/1.1 = 909.09/s; lambda = 500/s: rho = 0.55, R = 1/(mu - lambda) = 1/409.09 s.
    result = mix_mm1(500.0, 0.9, 1000.0, 500.0)
    assert result.utilization == pytest.approx(0.55)
    assert result.mean_response_time == pytest.approx(1.0 / (1000.0 / 1.1 - 500.0))


def test_mix_mmm_hand_case():
    # m = 2, mu = 1000/1.1 each, lambda = 1000/s: rho = 0.55; Erlang C by hand.
    rho, m = 0.55, 2
    a = m * rho
    p0 = 1.0 / (1.0 + a + a**2 / (math.factorial(m) * (1.0 - rho)))
    prob_queueing = a**m / (math.factorial(m) * (1.0 - rho)) * p0
    result = mix_mmm(1000.0, 0.9, 1000.0, 500.0, m)
    assert result.utilization == pytest.approx(rho)
    assert result.prob_queueing == pytest.approx(prob_queueing)


def test_mix_rejects_bad_share():
    with pytest.raises(ValueError):
        mix_service_rate(1.5, 1000.0, 500.0)
