"""Per-server centres from request counts, solved by MVA, against a hand computation."""

import pytest

from memrelay_lab.analysis._server_visits import server_centers, visit_ratios
from memrelay_lab.theory import mva


def test_visit_ratios_hand_case():
    assert visit_ratios({"a": 600, "b": 400}, 1000) == {"a": 0.6, "b": 0.4}


def test_server_centres_in_mva_hand_case():
    # V = 0.6, 0.4; S = 1 ms, 2 ms: D = 0.6 ms, 0.8 ms. Exact MVA by hand, Z = 0:
    # n=1: R = 1.4, Q_a = 0.6/1.4, Q_b = 0.8/1.4
    # n=2: R_a = 0.6 (1 + 0.6/1.4), R_b = 0.8 (1 + 0.8/1.4), X = 2 / (R_a + R_b)
    centers = server_centers({"a": 600, "b": 400}, 1000, {"a": 1.0, "b": 2.0})
    assert [c.demand for c in centers] == pytest.approx([0.6, 0.8])
    result = mva(centers, population=2)
    r_a, r_b = 0.6 * (1 + 0.6 / 1.4), 0.8 * (1 + 0.8 / 1.4)
    assert result.throughput[0] == pytest.approx(1 / 1.4)
    assert result.throughput[1] == pytest.approx(2 / (r_a + r_b))
    assert result.response_time[1] == pytest.approx(r_a + r_b)


def test_server_centres_need_every_service_time():
    with pytest.raises(ValueError):
        server_centers({"a": 1, "b": 1}, 2, {"a": 1.0})


def test_server_network_by_hand():
    # two servers, D = 0.6 ms and 0.8 ms; clients measured R = 2.4 ms, so the rest is a delay of
    # 1.0 ms; N = 2. Exact MVA by hand: n=1: R = 2.4, X = 1/2.4, Q_a = 0.6/2.4, Q_b = 0.8/2.4;
    # n=2: R_a = 0.6 (1 + 0.25), R_b = 0.8 (1 + 1/3), R = R_a + R_b + 1.0, X = 2 / R.
    import pandas as pd

    from memrelay_lab.analysis import server_network

    demands = pd.DataFrame({"configuration": [0, 0], "server": [0, 1], "demand_us": [600.0, 800.0],
                            "utilization": [0.4, 0.5]})
    table = pd.DataFrame({"configuration": [0], "clients": [2], "response_ms": [2.4], "throughput": [800.0]})
    frame = server_network(demands, table).set_index("server")
    r = 0.6 * 1.25 + 0.8 * (4 / 3) + 1.0
    assert frame.loc[0, "R_model_ms"] == pytest.approx(r)
    assert frame.loc[0, "X_model"] == pytest.approx(2 / r * 1e3)
    assert frame.loc[1, "U_model"] == pytest.approx(2 / r * 0.8)
    assert frame.loc[0, "Q_model"] == pytest.approx(2 / r * 0.6 * 1.25)
    assert frame.loc[1, "U_measured"] == 0.5
