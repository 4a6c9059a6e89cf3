"""Summary statistics over repetitions: means with t-based confidence intervals,
and combining latencies that were measured over different numbers of requests.

Every experiment configuration is repeated r times; the report shows the mean over the
repetitions with a confidence interval from Student's t distribution with r - 1 degrees
of freedom (seed 000 plots use 99 %, the default here is 95 %). Latencies reported per
window, per request type or per middleware are means over different request counts, so
they are combined weighted by those counts, never averaged plainly.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
from scipy import special

from .._values import jsonable

__all__ = [
    "ConfidenceInterval",
    "mean_confidence_interval",
    "confidence_interval_frame",
    "weighted_mean",
    "combine_latencies",
    "combine_latency_std",
]


@dataclass(frozen=True)
class ConfidenceInterval:
    """Mean of n observations and the two-sided confidence interval around it."""

    mean: float
    half_width: float
    low: float
    high: float
    n: int
    level: float

    def to_dict(self) -> dict[str, float | int | None]:
        """Plain dict for JSON; NaN (n = 1) becomes None."""
        return jsonable(asdict(self))


def mean_confidence_interval(values: Iterable[float], level: float = 0.95) -> ConfidenceInterval:
    """Mean of `values` with a t-distribution confidence interval at `level`.

    half_width = t_{(1+level)/2; n-1} * s / sqrt(n), with s the sample standard deviation.
    With a single observation the spread is unknown: half_width, low and high are NaN.
    """
    _check_level(level)
    data = np.asarray(list(values), dtype=float)
    if data.size == 0:
        raise ValueError("cannot compute a confidence interval of no values")
    if not np.all(np.isfinite(data)):
        raise ValueError("values must be finite numbers (got NaN or infinity)")
    n = int(data.size)
    mean = float(data.mean())
    if n == 1:
        half_width = math.nan
    else:
        t_quantile = special.stdtrit(n - 1, (1.0 + level) / 2.0)
        half_width = float(t_quantile * data.std(ddof=1) / math.sqrt(n))
    return ConfidenceInterval(
        mean=mean,
        half_width=half_width,
        low=mean - half_width,
        high=mean + half_width,
        n=n,
        level=level,
    )


def confidence_interval_frame(
    frame: pd.DataFrame,
    by: str | Sequence[str],
    columns: str | Sequence[str],
    level: float = 0.95,
) -> pd.DataFrame:
    """Mean and confidence interval of each of `columns` for every group of `by`.

    One row per group; for each column c the result has c_mean, c_half_width, c_low,
    c_high, plus one `n` column (the number of repetitions in the group).
    """
    by_columns = [by] if isinstance(by, str) else list(by)
    value_columns = [columns] if isinstance(columns, str) else list(columns)
    missing = [c for c in by_columns + value_columns if c not in frame.columns]
    if missing:
        raise ValueError(f"missing columns: {', '.join(missing)}")
    records = []
    for key, group in frame.groupby(by_columns, sort=True):
        keys = key if isinstance(key, tuple) else (key,)
        record: dict[str, object] = dict(zip(by_columns, keys))
        for column in value_columns:
            interval = mean_confidence_interval(group[column], level)
            record[f"{column}_mean"] = interval.mean
            record[f"{column}_half_width"] = interval.half_width
            record[f"{column}_low"] = interval.low
            record[f"{column}_high"] = interval.high
            record["n"] = interval.n
        records.append(record)
    return pd.DataFrame.from_records(records)


def weighted_mean(values: Iterable[float], weights: Iterable[float]) -> float:
    """Sum(w * v) / sum(w). Weights must be non-negative with a positive sum."""
    v = np.asarray(list(values), dtype=float)
    w = np.asarray(list(weights), dtype=float)
    if v.shape != w.shape:
        raise ValueError(f"{v.size} values but {w.size} weights")
    if v.size == 0:
        raise ValueError("cannot average no values")
    if np.any(w < 0) or not np.all(np.isfinite(w)):
        raise ValueError("weights must be finite and non-negative")
    total = w.sum()
    if total <= 0:
        raise ValueError("weights sum to zero")
    return float(np.dot(v, w) / total)


def combine_latencies(mean_latencies: Iterable[float], request_counts: Iterable[float]) -> float:
    """Mean latency over all requests, given each group's mean latency and request count.

    E.g. a window's get and set means, or the means of two middlewares: the overall mean
    is the request-count weighted mean, which equals the mean over the pooled requests.
    Groups with zero requests (whose mean may be NaN) are ignored.
    """
    means = np.asarray(list(mean_latencies), dtype=float)
    counts = np.asarray(list(request_counts), dtype=float)
    if means.shape != counts.shape:
        raise ValueError(f"{means.size} latencies but {counts.size} request counts")
    used = counts > 0
    return weighted_mean(means[used], counts[used])


def combine_latency_std(
    mean_latencies: Iterable[float],
    std_latencies: Iterable[float],
    request_counts: Iterable[float],
) -> float:
    """Standard deviation over all requests of several groups (law of total variance).

    Each group's std is taken as the population std over its requests, so the pooled
    variance is the count-weighted mean of within-group variances plus the count-weighted
    variance of the group means.
    """
    means = np.asarray(list(mean_latencies), dtype=float)
    stds = np.asarray(list(std_latencies), dtype=float)
    counts = np.asarray(list(request_counts), dtype=float)
    if not (means.shape == stds.shape == counts.shape):
        raise ValueError("means, stds and request counts must have the same length")
    used = counts > 0
    means, stds, counts = means[used], stds[used], counts[used]
    overall = weighted_mean(means, counts)
    within = weighted_mean(stds**2, counts)
    between = weighted_mean((means - overall) ** 2, counts)
    return math.sqrt(within + between)


def _check_level(level: float) -> None:
    if not 0.0 < level < 1.0:
        raise ValueError(f"confidence level must be between 0 and 1 (exclusive), got {level}")
