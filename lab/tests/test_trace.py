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
    # A clients' window without the bench's spread (an earlier memrelay-bench): NaN, not 0.
    assert trace.loc[trace["source"] == "clients", "response_std_ms"].isna().all()
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


def _bench(seconds_latencies_us: list[dict[str, list[float]]]) -> dict:
    """A memrelay-bench JSON document with one interval per element: per type, its latencies
    summarised as the bench writes them (count, mean and std over n, µs)."""
    import numpy as np

    def summary(values):
        values = np.asarray(values, dtype=float)
        latency = ({"mean": float(values.mean()), "std": float(values.std())} if len(values) else
                   {"mean": None, "std": None})
        return {"count": len(values), "keys": len(values), "hits": len(values), "misses": 0, "errors": 0,
                "latency_us": latency}

    intervals = []
    for second, types in enumerate(seconds_latencies_us):
        every = [x for values in types.values() for x in values]
        intervals.append({"second": second, "duration_s": 1.0, "totals": summary(every),
                          **{kind: summary(types.get(kind, [])) for kind in ("set", "get", "multiget")}})
    return {"intervals": intervals}


def test_clients_per_second_spread_pools_the_benches_exactly():
    # Two benches, two types, two seconds: the window's spread is that of all its requests
    # together (np.std over the pooled latencies), not a mean of the benches' spreads.
    import numpy as np
    from memrelay_lab.results import _load

    rng = np.random.default_rng(36)
    seconds_a = [{"get": list(rng.exponential(800, 300) + 200), "set": list(rng.exponential(3000, 40) + 500)}
                 for _ in range(2)]
    seconds_b = [{"get": list(rng.exponential(1500, 100) + 100)}, {"get": [], "set": [900.0]}]
    windows = _load._client_windows([_bench(seconds_a), _bench(seconds_b)], 0.0, 2.0)
    for second, window in enumerate(windows):
        pooled = [x for seconds in (seconds_a, seconds_b) for values in seconds[second].values() for x in values]
        assert window["count"] == len(pooled)
        assert window["response_ms"] == pytest.approx(np.mean(pooled) / 1000, rel=1e-12)
        assert window["response_std_ms"] == pytest.approx(np.std(pooled) / 1000, rel=1e-9)


def test_an_older_bench_without_spread_loads_with_nan():
    from memrelay_lab.results import _load

    bench = _bench([{"get": [100.0, 300.0]}])
    for part in ("totals", "get", "set", "multiget"):
        bench["intervals"][0][part]["latency_us"].pop("std")
    window = _load._client_windows([bench], 0.0, 1.0)[0]
    assert window["response_ms"] == pytest.approx(0.2) and math.isnan(window["response_std_ms"])


def test_figure_36_draws_clients_and_middleware_spread(monkeypatch):
    from memrelay_lab.report import _plots, _trace_section

    rows = []
    for t in range(4):
        rows.append({"run_id": "r", "source": "clients", "t_s": float(t), "count": 100, "length_s": 1.0,
                     "response_ms": 3.0, "response_std_ms": 1.0 + 0.1 * t, "kept": True})
        rows.append({"run_id": "r", "source": "middleware-0", "t_s": float(t), "count": 100, "length_s": 1.0,
                     "response_ms": 2.0, "response_std_ms": 0.5, "kept": True})
    trace = trace_frame(pd.DataFrame(rows), "r")
    stats = trace_statistics(trace)
    spread = stats[stats["measure"] == "response time, standard deviation within the second (ms)"]
    assert sorted(spread["source"]) == ["clients", "middleware-0"]
    assert spread.set_index("source").loc["clients", "mean"] == pytest.approx(1.15)
    drawn = {}
    monkeypatch.setattr(_plots, "png_bytes", lambda figure: drawn.setdefault("figure", figure) and b"png")
    _trace_section._trace_plot({"r": trace})
    panel = drawn["figure"].axes[2]
    assert sorted(line.get_label() for line in panel.get_lines()) == ["r clients", "r middleware-0"]
    clients = next(line for line in panel.get_lines() if line.get_label() == "r clients")
    assert list(clients.get_ydata()) == pytest.approx([1.0, 1.1, 1.2, 1.3])
