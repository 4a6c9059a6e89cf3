"""A run over time: throughput and response time per second (seed 001 appendix, Figures 35-36,
the one-hour stability trace that seed 002 §1 takes its inputs from).

`trace_frame(windows, run_id)` takes one run's per-second windows (`results.windows`: the
clients' summed bench intervals and each middleware's windows, both with the standard
deviation of each window's response times, seed 001 Figure 36's per-interval spread) and `trace_statistics` says how
steady they are over the kept (trimmed) interval: the mean, standard deviation, coefficient of
variation, extremes and the least-squares trend per minute of each series. A stable run has a
small coefficient of variation and a trend near zero.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["TRACE_MEASURES", "trace_frame", "trace_statistics"]

TRACE_MEASURES = (("throughput", "throughput (requests/s)"), ("response_ms", "response time (ms)"),
                  ("response_std_ms", "response time, standard deviation within the second (ms)"))


def trace_frame(windows: pd.DataFrame, run_id: str) -> pd.DataFrame:
    """The run's windows as (source, t_s, throughput, response_ms, response_std_ms, kept), sorted
    by time (response_std_ms: NaN where the source wrote no spread, e.g. an older memrelay-bench);
    sources are ``clients`` and ``middleware-K``; throughput = the window's requests over its
    length (a middleware window cut by the kept interval's end: its share over the overlap)."""
    columns = ["source", "t_s", *(m for m, _ in TRACE_MEASURES), "kept"]
    if windows.empty or "run_id" not in windows:
        return pd.DataFrame(columns=columns)
    part = windows[windows["run_id"] == run_id]
    part = part[part["source"].astype(str).str.match(r"^(clients|middleware-\d+)$")]
    part = part.assign(throughput=part["count"] / part["length_s"].where(part["length_s"] > 0))
    if "response_std_ms" not in part:
        part = part.assign(response_std_ms=float("nan"))
    return part[columns].sort_values(["source", "t_s"]).reset_index(drop=True)


def trace_statistics(trace: pd.DataFrame) -> pd.DataFrame:
    """Per source and measure, over the kept windows: mean, std (n - 1), cv = std / mean, min,
    max and the trend (slope of the least-squares line, per minute); empty without kept windows."""
    rows = []
    kept = trace[trace["kept"].astype(bool)]
    for source, part in kept.groupby("source", sort=True):
        for measure, label in TRACE_MEASURES:
            series = part[["t_s", measure]].dropna()
            if len(series) < 2:
                continue
            values = series[measure].to_numpy(dtype=float)
            mean = float(values.mean())
            std = float(values.std(ddof=1))
            slope = float(np.polyfit(series["t_s"].to_numpy(dtype=float), values, 1)[0]) * 60.0
            rows.append({"source": source, "measure": label, "seconds": len(series), "mean": mean, "std": std,
                         "cv": std / mean if mean else float("nan"), "min": float(values.min()),
                         "max": float(values.max()), "trend per minute": slope})
    return pd.DataFrame(rows)
