"""Seed 001 §1.3 (Table 4) without a request log: the per-type times of memrelay's summary.json,
pooled by hand here: means weighted by requests, percentiles the median of the runs' own."""

from types import SimpleNamespace

import pandas as pd
import pytest

from memrelay_lab.analysis import summary_time_distributions


def _times(mean, p50, p90, p99):
    return {"mean": mean, "p50": p50, "p90": p90, "p99": p99, "p999": p99, "max": p99}


def _document(count, scale):
    get = {"count": count, **{t: _times(100 * scale, 80 * scale, 150 * scale, 300 * scale)
                              for t in ("response_us", "queue_us", "service_us")}}
    return {"types": {"get": get, "set": {"count": 0}, "multiget": {"count": 0}}}


def test_pooled_from_summary_json_by_hand():
    documents = {"c000-r1": [_document(1000, 1.0)], "c000-r2": [_document(3000, 2.0)],
                 "c000-r3": [_document(1000, 4.0)]}
    results = SimpleNamespace(middleware_summaries=lambda run_id: documents[run_id])
    summary = SimpleNamespace(
        results=results, display_columns=["servers"],
        table=pd.DataFrame([{"configuration": 0, "servers": 3}]),
        run_ids=lambda configuration: ["c000-r1", "c000-r2", "c000-r3"],
    )
    frame = summary_time_distributions(summary)
    assert set(frame["type"]) == {"get"} and len(frame) == 3  # the empty set and multiget types are left out
    queue = frame[frame["time"] == "queue"].iloc[0]
    assert queue["requests"] == 5000
    # (1000 * 100 + 3000 * 200 + 1000 * 400) / 5000 = 220 µs
    assert queue["mean_ms"] == pytest.approx(0.220)
    # the runs' p90: 150, 300, 600 µs -> median 300 µs
    assert queue["p90_ms"] == pytest.approx(0.300)
    assert pd.isna(queue["std_ms"])
