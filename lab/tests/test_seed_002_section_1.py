"""Seed 002 §1 (the middleware as one M/M/1, from the stability trace): its μ from its printed
per-type rates and its results from its printed λ and μ.

The seed prints μ_get = 355/s and μ_set = 133/s (1/E[s], E[s] = 2.8 and 7.5 ms), normalises
them by the threads (16 read threads on each of 3 servers, one set thread per server) to
μ = 0.99 x 48 μ_get + 0.01 x 3 μ_set = 16,866.78/s, and with λ = 11,500/s gets ρ = 0.68,
E[n] = 2.125, E[n_q] = 1.445 and E[r] = 0.19 ms. Its 90th percentile, "2.3 x E[r] = 10.58 ms",
is 2.3 x 4.6 ms, not of its E[r]: the M/M/1's is ln(10) E[r] = 0.43 ms."""

import math

import pytest

from memrelay_lab.theory import mix_service_rate, mm1

LAMBDA, MU = 11_500.0, 16_866.78


def test_service_rate_from_the_per_type_rates():
    # The rates are printed with three digits: 355 stands for 354.86 (μ_get = 1/2.818 ms).
    mu = mix_service_rate(0.99, 16 * 3 * 355.0, 3 * 133.0, weighting="rate")
    assert mu == pytest.approx(MU, rel=5e-4)


def test_results_from_lambda_and_mu():
    model = mm1(LAMBDA, MU)
    assert model.rho == pytest.approx(0.68, abs=0.005)
    # The seed's E[n] and E[n_q] are those of ρ rounded to 0.68 ...
    rounded = mm1(0.68 * MU, MU)
    assert rounded.mean_jobs_in_system == pytest.approx(2.125)
    assert rounded.mean_jobs_in_queue == pytest.approx(1.445, abs=5e-4)
    # ... the unrounded ρ = 0.6818 gives 2.143 and 1.461 (both laws hold: E[n] = λ E[r]).
    assert model.mean_jobs_in_system == pytest.approx(2.143, abs=5e-4)
    assert model.mean_jobs_in_system == pytest.approx(LAMBDA * model.mean_response_time)
    assert model.mean_response_time * 1e3 == pytest.approx(0.19, abs=0.005)
    # The 90th percentile of an exponential response time: ln(10) E[r], 0.43 ms, not 10.58 ms.
    p90 = model.response_time_percentile(90)
    assert p90 == pytest.approx(math.log(10) * model.mean_response_time)
    assert p90 * 1e3 == pytest.approx(0.429, abs=1e-3)
