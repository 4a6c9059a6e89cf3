"""Seed 001's figures the report draws: gets' and sets' throughput apart (Figures 7-8), the
percentiles of T_total beside T_queue and T_server (Figures 9-12, 23-34) and their means with
standard deviations (Figures 13-16), on a hand-made table; each figure's absence where the
folder lacks what it shows is checked too (the check can fail)."""

from types import SimpleNamespace

import pandas as pd

from memrelay_lab.report import _plots as plots
from memrelay_lab.report._time_distributions_section import _means_plot, _percentiles_plot


def _table(set_share):
    return pd.DataFrame([{"replication": r, "servers": s, "throughput_get": 1000.0 * (1 - set_share) / s,
                          "throughput_get_half_width": 5.0, "throughput_set": 1000.0 * set_share / s,
                          "throughput_set_half_width": 1.0}
                         for s in (3, 5) for r in ("none", "half", "full")])


def test_per_type_throughput_only_with_reads_and_writes():
    figure = plots.throughput_per_type_plot(_table(0.05), "servers", ["replication"], 0.95, "set")
    assert figure is not None
    assert figure.axes[0].get_ylabel() == "set throughput (requests/s)"
    assert len(figure.axes[0].containers) == 3  # one error-bar series per replication
    assert plots.throughput_per_type_plot(_table(0.0), "servers", ["replication"], 0.95, "set") is None


def _distributions(with_std=True):
    rows = []
    for s in (3, 5):
        for kind in ("get", "set"):
            for time in ("total", "queue", "server"):
                rows.append({"configuration": s, "servers": s, "type": kind, "time": time, "requests": 100,
                             "mean_ms": 1.0 * s, "std_ms": 0.5 if with_std else float("nan"), "p50_ms": 0.9 * s,
                             "p90_ms": 1.5 * s, "p99_ms": 3.0 * s})
    return pd.DataFrame(rows)


def test_total_time_percentiles_and_means_with_standard_deviations():
    summary = SimpleNamespace(x="servers", series=[])
    percentiles = _percentiles_plot(_distributions(), summary)
    assert percentiles.name == "time_percentiles" and "Figures 9-12, 23-34" in percentiles.caption
    means = _means_plot(_distributions(), summary)
    assert means.name == "time_means" and "Figures 13-16" in means.caption
    # Without standard deviations (summary.json only) there is no such figure.
    assert _means_plot(_distributions(with_std=False), summary) is None


def test_seed_001_tables_1_to_3_layout():
    # Per configuration, the clients' mean, percentiles and standard deviation beside the
    # throughput; the middleware's rows (no standard deviation of their buckets) left out.
    from memrelay_lab.report._sections import distribution_table

    percentiles = pd.DataFrame([
        {"configuration": 0, "workers": 16, "clients": 200, "side": "clients", "mean_ms": 12.0, "p50_ms": 11.0,
         "p90_ms": 20.0, "p99_ms": 40.0, "std_ms": 6.0},
        {"configuration": 0, "workers": 16, "clients": 200, "side": "middleware", "mean_ms": 9.0, "p50_ms": 8.0,
         "p90_ms": 15.0, "p99_ms": 30.0, "std_ms": float("nan")},
    ])
    summary = SimpleNamespace(percentiles=percentiles, display_columns=["workers", "clients"],
                              table=pd.DataFrame([{"configuration": 0, "throughput": 16000.0}]))
    frame = distribution_table(summary)
    assert frame.to_dict("records") == [{"configuration": 0, "workers": 16, "clients": 200, "mean_ms": 12.0,
                                         "p50_ms": 11.0, "p90_ms": 20.0, "p99_ms": 40.0, "std_ms": 6.0,
                                         "throughput": 16000.0}]
    assert distribution_table(SimpleNamespace(percentiles=percentiles.drop(columns="std_ms"))) is None
