"""Throughput and response time over a run (seed 001 appendix), against hand-worked statistics."""

import math

import pandas as pd
import pytest

from memrelay_lab.analysis import trace_frame, trace_statistics


def _windows():
    rows = []
    # clients: 1000, 1010, 990, 1020, 980 requests/s in the kept seconds 1..5, a warm-up second 0
    for t, x in enumerate([500, 1000, 1010, 990, 1020, 980]):
        rows.append({"run_id": "c000-r1", "source": "clients", "t_s": float(t), "count": x / 2, "length_s": 0.5,
                     "response_ms": 2.0 + 0.1 * t, "kept": t >= 1})
    rows.append({"run_id": "c000-r1", "source": "middleware", "t_s": 1.0, "count": 1, "length_s": 1.0, "response_ms": 1.0,
                 "kept": True})  # the combined source is not a series of its own
    rows.append({"run_id": "c001-r1", "source": "clients", "t_s": 1.0, "count": 7, "length_s": 1.0, "response_ms": 1.0,
                 "kept": True})
    return pd.DataFrame(rows)


def test_trace_keeps_one_run_and_its_own_sources():
    trace = trace_frame(_windows(), "c000-r1")
    assert trace["source"].unique().tolist() == ["clients"] and len(trace) == 6


def test_trace_statistics_by_hand():
    stats = trace_statistics(trace_frame(_windows(), "c000-r1")).set_index("measure")
    throughput = stats.loc["throughput (requests/s)"]
    # kept: 1000, 1010, 990, 1020, 980: mean 1000, squares 0+100+100+400+400 = 1000 over 4
    assert throughput["seconds"] == 5 and throughput["mean"] == pytest.approx(1000.0)
    assert throughput["std"] == pytest.approx(math.sqrt(250.0))
    assert throughput["cv"] == pytest.approx(math.sqrt(250.0) / 1000.0)
    # slope over t = 1..5: sum (t - 3)(x - 1000) = -2*0 + -1*10 + 0 + 1*20 + 2*(-20) = -30, over 10
    assert throughput["trend per minute"] == pytest.approx(-3.0 * 60)
    response = stats.loc["response time (ms)"]
    assert response["trend per minute"] == pytest.approx(0.1 * 60)  # 0.1 ms per second
    assert response["min"] == pytest.approx(2.1) and response["max"] == pytest.approx(2.5)


def test_per_second_spread_of_the_middleware_seed_001_figure_36():
    rows = [{"run_id": "r", "source": "middleware-0", "t_s": float(t), "count": 100, "length_s": 1.0,
             "response_ms": 2.0, "response_std_ms": std, "kept": True} for t, std in enumerate([0.5, 0.7, 0.9])]
    rows.append({"run_id": "r", "source": "clients", "t_s": 0.0, "count": 100, "length_s": 1.0, "response_ms": 3.0,
                 "kept": True})
    trace = trace_frame(pd.DataFrame(rows), "r")
    assert trace.loc[trace["source"] == "clients", "response_std_ms"].isna().all()  # no spread per second
    stats = trace_statistics(trace)
    spread = stats[(stats["source"] == "middleware-0")
                   & (stats["measure"] == "response time, standard deviation within the second (ms)")].iloc[0]
    assert spread["mean"] == pytest.approx(0.7) and spread["trend per minute"] == pytest.approx(0.2 * 60)


def test_loading_sets_each_middleware_window_spread(monkeypatch):
    from memrelay_lab.results import _load

    class Fake:
        def __init__(self, std):
            self.total, self._std = 10, std

        def std(self):
            return self._std

        def merged(self, other):
            return self

    monkeypatch.setattr(_load.HdrHistogram, "decode", staticmethod(lambda text: Fake(float(text))))
    raw = [{"length_s": 1.0, "response_hdr": "500"}, {"length_s": 1.0, "response_hdr": "1500"}, {"length_s": 1.0}]
    series = [{"kept": False, "length_s": 1.0}, {"kept": True, "length_s": 1.0}, {"kept": True, "length_s": 1.0}]
    assert _load._kept_hdr(raw, series) is not None
    assert [w.get("response_std_ms") for w in series] == [0.5, 1.5, None]  # µs to ms; no histogram, no spread
