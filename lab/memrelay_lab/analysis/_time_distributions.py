"""Queue-time and server-time distributions from the middlewares' request logs (seed 001 §1.3,
Table 4 and Figures 4-6).

memrelay logs every N-th request with its timestamps (``request_log_sample``); the requests of
a configuration's repetitions that arrived inside the trimmed interval are pooled, as the seed
pools the middle third of each repetition's log. Per configuration, request type and time:

- ``total``: the request's time in the middleware (arrival to reply written, T_total);
- ``queue``: its time in the request queue (T_queue);
- ``server``: its time in the servers (first request sent to last reply, T_server);

the number of logged requests, the mean, the standard deviation and the 50th, 90th and 99th
percentiles (in ms; percentiles are order statistics, the smallest value with at least q% of
the requests at or below it, as HdrHistogram reports them). A mean alone hides these
distributions' tails (the seed's point), hence the spread and the percentiles beside it.

Without a request log, `summary_time_distributions` gives the same rows from memrelay's
summary.json, which keeps per type the mean and the 50th, 90th and 99th percentiles of the
three times over the whole run (not trimmed): the mean pooled over the repetitions and
middlewares (weighted by their requests), each percentile the median of the runs' own
percentiles (percentiles of separate runs cannot be pooled), no standard deviation.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..results import ResultsSummary, request_log

__all__ = [
    "REQUEST_TIMES", "distribution_statistics", "logged_requests", "summary_time_distributions", "time_distributions",
]

# The three times of a logged request: name -> request-log column.
REQUEST_TIMES = {"total": "response_us", "queue": "queue_us", "server": "service_us"}
_QUANTILES = {"p50": 0.50, "p90": 0.90, "p99": 0.99}
_TYPES = ("get", "multiget", "set")


def logged_requests(summary: ResultsSummary, configuration: int) -> pd.DataFrame:
    """The logged requests of one configuration's repetitions inside their trimmed intervals."""
    parts = [request_log(summary.results, run_id) for run_id in summary.run_ids(configuration)]
    parts = [p for p in parts if not p.empty]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def time_distributions(summary: ResultsSummary) -> pd.DataFrame | None:
    """One row per configuration, request type and time (module docstring); None when no run
    logged requests."""
    rows = []
    for _, config in summary.table.iterrows():
        log = logged_requests(summary, int(config["configuration"]))
        if log.empty:
            continue
        identity = {"configuration": config["configuration"], **{c: config[c] for c in summary.display_columns}}
        for kind in _TYPES:
            of_kind = log[log["type"] == kind]
            if of_kind.empty:
                continue
            for time, column in REQUEST_TIMES.items():
                rows.append({**identity, "type": kind, "time": time,
                             **distribution_statistics(of_kind[column].to_numpy(dtype=float) / 1e3)})
    return pd.DataFrame(rows) if rows else None


def distribution_statistics(values_ms: np.ndarray) -> dict:
    """Requests, mean, standard deviation and order-statistic percentiles of `values_ms`."""
    values = np.sort(values_ms[np.isfinite(values_ms)])
    if values.size == 0:
        return {"requests": 0, "mean_ms": math.nan, "std_ms": math.nan, **{f"{n}_ms": math.nan for n in _QUANTILES}}
    statistics = {"requests": int(values.size), "mean_ms": float(values.mean()), "std_ms": float(values.std())}
    for name, q in _QUANTILES.items():
        rank = max(math.ceil(q * values.size), 1)
        statistics[f"{name}_ms"] = float(values[rank - 1])
    return statistics


def summary_time_distributions(summary: ResultsSummary) -> pd.DataFrame | None:
    """The rows of `time_distributions` from the middlewares' summary.json (module docstring);
    None when no run had a middleware."""
    rows = []
    for _, config in summary.table.iterrows():
        documents = []
        for run_id in summary.run_ids(int(config["configuration"])):
            try:
                documents += summary.results.middleware_summaries(run_id)
            except (KeyError, FileNotFoundError):
                continue
        identity = {"configuration": config["configuration"], **{c: config[c] for c in summary.display_columns}}
        for kind in _TYPES:
            parts = [d["types"][kind] for d in documents if d.get("types", {}).get(kind, {}).get("count", 0) > 0]
            if not parts:
                continue
            counts = np.array([p["count"] for p in parts], dtype=float)
            for time, column in REQUEST_TIMES.items():
                if any(column not in p for p in parts):
                    continue
                statistics = {"requests": int(counts.sum()),
                              "mean_ms": float(np.average([p[column]["mean"] for p in parts], weights=counts)) / 1e3,
                              "std_ms": math.nan}
                for name in _QUANTILES:
                    statistics[f"{name}_ms"] = float(np.median([p[column][name] for p in parts])) / 1e3
                rows.append({**identity, "type": kind, "time": time, **statistics})
    return pd.DataFrame(rows) if rows else None
