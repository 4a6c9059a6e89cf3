"""Confidence intervals against t tables and scipy's own interval; latency combination
against the pooled requests."""

import json
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from memrelay_lab import (
    ConfidenceInterval,
    combine_latencies,
    combine_latency_std,
    confidence_interval_frame,
    mean_confidence_interval,
    weighted_mean,
)


def test_ci_of_five_values_matches_the_t_table():
    # mean 3, s = sqrt(2.5) = 1.5811, s / sqrt(5) = 0.7071; t[0.975; 4] = 2.776 (t table).
    interval = mean_confidence_interval([1, 2, 3, 4, 5])
    assert interval.mean == 3.0
    assert interval.half_width == pytest.approx(2.776 * 0.70711, abs=1e-3)
    assert (interval.low, interval.high) == pytest.approx((3 - 1.963, 3 + 1.963), abs=1e-3)
    assert interval.n == 5 and interval.level == 0.95


def test_level_is_selectable():
    # t[0.995; 4] = 4.604 (t table): the 99 % interval of the same data.
    interval = mean_confidence_interval([1, 2, 3, 4, 5], level=0.99)
    assert interval.half_width == pytest.approx(4.604 * 0.70711, abs=1e-3)


@given(
    st.lists(st.floats(min_value=-1e6, max_value=1e6), min_size=2, max_size=30),
    st.sampled_from([0.8, 0.9, 0.95, 0.99]),
)
def test_ci_matches_scipy_t_interval(values, level):
    interval = mean_confidence_interval(values, level)
    sem = stats.sem(values)
    if sem == 0:
        assert interval.half_width == 0
        return
    low, high = stats.t.interval(level, len(values) - 1, loc=np.mean(values), scale=sem)
    assert interval.low == pytest.approx(low, rel=1e-9, abs=1e-6)
    assert interval.high == pytest.approx(high, rel=1e-9, abs=1e-6)


def test_one_repetition_has_an_undefined_half_width():
    interval = mean_confidence_interval([4.2])
    assert interval.mean == 4.2 and interval.n == 1
    assert math.isnan(interval.half_width) and math.isnan(interval.low) and math.isnan(interval.high)
    assert json.loads(json.dumps(interval.to_dict()))["half_width"] is None


def test_bad_inputs_are_rejected():
    with pytest.raises(ValueError, match="no values"):
        mean_confidence_interval([])
    with pytest.raises(ValueError, match="level"):
        mean_confidence_interval([1, 2], level=95)
    with pytest.raises(ValueError, match="finite"):
        mean_confidence_interval([1, float("nan")])


def test_result_is_a_frozen_dataclass():
    interval = mean_confidence_interval([1, 2])
    assert isinstance(interval, ConfidenceInterval)
    with pytest.raises(AttributeError):
        interval.mean = 0  # type: ignore[misc]


def test_confidence_interval_frame_per_configuration():
    frame = pd.DataFrame(
        {
            "workers": [8, 8, 8, 32, 32, 32],
            "throughput": [1, 2, 3, 10, 10, 10],
            "response_time": [5, 5, 5, 1, 2, 3],
        }
    )
    table = confidence_interval_frame(frame, "workers", ["throughput", "response_time"]).set_index("workers")
    assert table.loc[8, "throughput_mean"] == 2
    # mean 2, s = 1, t[0.975; 2] = 4.303 (t table): half width 4.303 / sqrt(3).
    assert table.loc[8, "throughput_half_width"] == pytest.approx(4.303 / math.sqrt(3), abs=1e-3)
    assert table.loc[32, "throughput_half_width"] == 0
    assert table.loc[32, "response_time_low"] == pytest.approx(2 - 4.303 / math.sqrt(3), abs=1e-3)
    assert list(table["n"]) == [3, 3]


def test_combine_latencies_equals_the_mean_over_pooled_requests():
    gets = [1.0, 2.0, 3.0]  # mean 2, 3 requests
    sets = [10.0]  # mean 10, 1 request
    assert combine_latencies([2.0, 10.0], [3, 1]) == pytest.approx(np.mean(gets + sets)) == 4.0
    # A group without requests (mean undefined) is ignored.
    assert combine_latencies([2.0, float("nan")], [3, 0]) == 2.0
    assert weighted_mean([1.0, 3.0], [1.0, 3.0]) == 2.5
    with pytest.raises(ValueError):
        weighted_mean([1.0], [0.0])
    with pytest.raises(ValueError):
        combine_latencies([1.0, 2.0], [1])


@given(st.lists(st.lists(st.floats(min_value=0, max_value=1e4), min_size=1, max_size=20), min_size=1, max_size=6))
def test_combined_mean_and_std_equal_the_pooled_ones(groups):
    means = [np.mean(g) for g in groups]
    stds = [np.std(g) for g in groups]
    counts = [len(g) for g in groups]
    pooled = np.concatenate(groups)
    assert combine_latencies(means, counts) == pytest.approx(pooled.mean(), rel=1e-9, abs=1e-9)
    assert combine_latency_std(means, stds, counts) == pytest.approx(pooled.std(), rel=1e-6, abs=1e-6)
