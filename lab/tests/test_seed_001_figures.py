"""Seed 001's figures the report draws: gets' and sets' throughput apart (Figures 7-8), the
percentiles of T_total beside T_queue and T_server (Figures 9-12, 23-34) and their means with
standard deviations (Figures 13-16), on a hand-made table; each figure's absence where the
folder lacks what it shows is checked too (the check can fail)."""

from types import SimpleNamespace

import pandas as pd
import pytest

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


def test_seed_001_tables_1_to_3_and_5_to_6(monkeypatch):
    # Per configuration, the clients' mean, percentiles and standard deviation beside the
    # throughput, of all requests and, with reads and writes, of the gets and the sets apart.
    from memrelay_lab.analysis import _response_statistics

    class Hdr:
        def __init__(self, scale):
            self.total, self.scale = 100, scale

        def mean(self):
            return 10_000.0 * self.scale

        def value_at_quantile(self, q):
            return 20_000.0 * q * self.scale

        def std(self):
            return 5_000.0 * self.scale

    scales = {None: 1.0, "get": 0.9, "set": 1.5}
    monkeypatch.setattr(_response_statistics, "merged_client_hdr", lambda results, ids, kind: Hdr(scales[kind]))
    table = pd.DataFrame([{"configuration": 0, "servers": 3, "throughput": 1000.0, "throughput_get": 950.0,
                           "throughput_set": 50.0}])
    summary = SimpleNamespace(table=table, display_columns=["servers"], results=None, run_ids=lambda c: ["r1"])
    frame = _response_statistics.response_statistics(summary).set_index("type")
    assert list(frame.index) == ["all", "get", "set"]
    assert frame.loc["set", "mean_ms"] == 15.0 and frame.loc["set", "std_ms"] == 7.5
    assert frame.loc["get", "p90_ms"] == pytest.approx(20.0 * 0.9 * 0.9)
    assert frame.loc["get", "throughput"] == 950.0 and frame.loc["all", "throughput"] == 1000.0
    # A read-only folder has the one row.
    summary.table = table.assign(throughput_set=0.0)
    assert list(_response_statistics.response_statistics(summary)["type"]) == ["all"]
