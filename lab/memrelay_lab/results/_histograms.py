"""Merging the latency histograms of several runs, and percentiles from merged histograms.

Percentiles of several runs are never averaged: the runs' histograms are merged (counts
added bucket by bucket) and the percentile is read from the merged histogram, which is the
percentile over all the pooled requests (of every repetition, every bench instance, every
middleware). Two kinds of histogram:

- the clients': memrelay-bench's HdrHistograms (decoded by `_hdr.HdrHistogram`), merged
  exactly with `HdrHistogram.merged`; percentiles follow HdrHistogram's
  ``value_at_quantile`` (3 significant digits), so one run's merged histogram reproduces
  the bench's own percentiles.
- the middlewares': ``summary.json``'s response-time histograms in 100 µs buckets (seed 000
  §1.9.2), summed over request types, middlewares and runs. A percentile is interpolated
  linearly inside the 100 µs bucket holding the q-th request, so it is within 100 µs of
  the exact value.

Both cover a whole run including warm-up and cool-down (neither program keeps histograms
per window), unlike the trimmed means of `load()`.

`Histogram` holds fixed-width buckets (lower, upper, count); `Results.histogram` re-bins the
clients' HdrHistograms into 100 µs buckets, so both sides can be drawn alike (seed 000
Figure 26) with `merged_buckets`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ._hdr import HdrHistogram

__all__ = [
    "BUCKET_US",
    "Histogram",
    "bucket_histogram",
    "PERCENTILES",
    "merged_buckets",
    "merged_client_hdr",
    "percentile_columns",
]

PERCENTILES = (25.0, 50.0, 75.0, 90.0, 99.0, 99.9)
BUCKET_US = 100


def percentile_columns(qs: Iterable[float] = PERCENTILES) -> dict[float, str]:
    """Column name of each percentile: 50 -> p50_ms, 99.9 -> p99_9_ms."""
    return {float(q): f"p{q:g}_ms".replace(".", "_") for q in qs}


@dataclass(frozen=True)
class Histogram:
    """Counts in buckets [lower[i], upper[i]) in µs, sorted and non-overlapping."""

    lower: np.ndarray
    upper: np.ndarray
    counts: np.ndarray

    def __post_init__(self) -> None:
        lower = np.asarray(self.lower, dtype=float)
        upper = np.asarray(self.upper, dtype=float)
        counts = np.asarray(self.counts, dtype=float)
        if not (lower.shape == upper.shape == counts.shape) or lower.ndim != 1:
            raise ValueError("lower, upper and counts must be 1-D arrays of the same length")
        if np.any(upper <= lower) or np.any(counts < 0):
            raise ValueError("buckets need upper > lower and counts >= 0")
        order = np.argsort(lower, kind="stable")
        lower, upper, counts = lower[order], upper[order], counts[order]
        if lower.size > 1 and np.any(lower[1:] < upper[:-1]):
            raise ValueError("buckets overlap")
        object.__setattr__(self, "lower", lower)
        object.__setattr__(self, "upper", upper)
        object.__setattr__(self, "counts", counts)

    @classmethod
    def from_frame(cls, frame: pd.DataFrame) -> Histogram:
        """From a frame with lower_us, upper_us and count (what `Results.histogram` returns)."""
        return cls(frame["lower_us"].to_numpy(), frame["upper_us"].to_numpy(), frame["count"].to_numpy())

    @classmethod
    def empty(cls) -> Histogram:
        return cls(np.array([]), np.array([]), np.array([]))

    @property
    def total(self) -> float:
        return float(self.counts.sum())

    def __bool__(self) -> bool:
        return self.total > 0

    def mean(self) -> float:
        """Mean with every value at its bucket's midpoint (NaN when empty)."""
        if not self:
            return math.nan
        return float(np.dot((self.lower + self.upper) / 2.0, self.counts) / self.total)

    def percentile(self, q: float) -> float:
        """The q-th percentile (q in [0, 100]), interpolated linearly inside its bucket."""
        if not 0.0 <= q <= 100.0:
            raise ValueError(f"percentile must be in [0, 100], got {q}")
        used = self.counts > 0
        counts, lower, upper = self.counts[used], self.lower[used], self.upper[used]
        if counts.size == 0:
            return math.nan
        cumulative = np.cumsum(counts)
        rank = q / 100.0 * cumulative[-1]
        index = min(int(np.searchsorted(cumulative, rank, side="left")), counts.size - 1)
        before = cumulative[index] - counts[index]
        fraction = min(max((rank - before) / counts[index], 0.0), 1.0)
        return float(lower[index] + fraction * (upper[index] - lower[index]))

    def scaled(self, factor: float) -> Histogram:
        """Counts multiplied by `factor` (e.g. 1 / seconds for requests per second)."""
        return Histogram(self.lower, self.upper, self.counts * factor)

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame({"lower_us": self.lower, "upper_us": self.upper, "count": self.counts})


def bucket_histogram(buckets: Iterable[tuple[int, int]], width: int = BUCKET_US) -> Histogram:
    """A `Histogram` of ``(lower_us, count)`` pairs in buckets of `width` µs (equal lowers added)."""
    pairs = list(buckets)
    if not pairs:
        return Histogram.empty()
    lower, counts = np.asarray(pairs, dtype=float).reshape(-1, 2).T
    keys, inverse = np.unique(lower, return_inverse=True)
    return Histogram(keys, keys + width, np.bincount(np.asarray(inverse).reshape(-1), weights=counts))


def merge(histograms: Iterable[Histogram]) -> Histogram:
    """Adds fixed-bucket histograms bucket by bucket (buckets matched on lower and upper)."""
    histograms = [h for h in histograms if h is not None and h.lower.size]
    if not histograms:
        return Histogram.empty()
    lower = np.concatenate([h.lower for h in histograms])
    upper = np.concatenate([h.upper for h in histograms])
    counts = np.concatenate([h.counts for h in histograms])
    keys, inverse = np.unique(np.stack([lower, upper], axis=1), axis=0, return_inverse=True)
    sums = np.bincount(np.asarray(inverse).reshape(-1), weights=counts)
    return Histogram(keys[:, 0], keys[:, 1], sums)


def merged_buckets(results, run_ids: Sequence[str], source: str, bucket_us: int = BUCKET_US) -> Histogram:
    """The 100 µs histogram of `source` (clients, middleware, middleware-K) summed over runs."""
    return merge(Histogram.from_frame(results.histogram(run_id, source, bucket_us)) for run_id in run_ids)


def merged_client_hdr(results, run_ids: Sequence[str], request_type: str | None = None) -> HdrHistogram | None:
    """Every bench instance's HdrHistogram of the given runs merged into one (None if none).

    `request_type` is None (all requests, the bench's ``totals``), set, get or multiget.
    """
    records = {record["id"]: record for record in results.manifest["runs"]}
    merged = None
    for run_id in run_ids:
        for client in records[run_id]["files"]["clients"]:
            document = json.loads((Path(results.path) / client["json"]).read_text())
            encoded = (document.get("histograms") or {}).get(request_type or "totals")
            if not encoded:
                continue
            histogram = HdrHistogram.decode(encoded)
            merged = histogram if merged is None else merged.merged(histogram)
    return merged
