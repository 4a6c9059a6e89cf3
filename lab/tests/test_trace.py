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
