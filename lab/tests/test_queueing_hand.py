"""M/M/m variance of response time and P(>= k jobs) against a hand computation (issue 14, item 4).

M/M/2 with lambda = mu = 1 (rho = 1/2), worked out by hand from Jain Box 31.2's definitions:
1/p0 = 1 + 1 + 1^2 / (2! (1 - 1/2)) = 3, so p0 = 1/3 and Erlang C = 1 / (2! * 1/2) * p0 = 1/3.
P(>= k) for k >= m is C rho^(k-m); P(>= 1) = 1 - p0.
The waiting time is 0 with probability 2/3 and Exp(m mu (1 - rho)) = Exp(1) with probability 1/3:
E[w] = 1/3, E[w^2] = 2/3, Var w = 5/9; r = w + s with s ~ Exp(1) independent, so Var r = 5/9 + 1 = 14/9.
"""

from __future__ import annotations

import pytest

from memrelay_lab.theory import mmm


def test_mm2_hand_computed_variance_and_tail_probabilities():
    model = mmm(1.0, 1.0, 2)
    assert model.prob_zero_jobs == pytest.approx(1 / 3)
    assert model.prob_queueing == pytest.approx(1 / 3)
    assert model.mean_response_time == pytest.approx(4 / 3)
    assert model.var_waiting_time == pytest.approx(5 / 9)
    assert model.var_response_time == pytest.approx(14 / 9)
    assert model.prob_at_least_jobs(0) == pytest.approx(1.0)
    assert model.prob_at_least_jobs(1) == pytest.approx(2 / 3)
    assert model.prob_at_least_jobs(2) == pytest.approx(1 / 3)
    assert model.prob_at_least_jobs(3) == pytest.approx(1 / 6)
    assert model.prob_at_least_jobs(5) == pytest.approx(1 / 24)
    assert model.to_dict(at_least_jobs=(5,))["prob_at_least_jobs"]["5"] == pytest.approx(1 / 24)
