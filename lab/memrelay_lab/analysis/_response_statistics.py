"""The clients' response-time statistics per configuration, as seed 001 prints them: Tables
1-3 (all requests: mean, 50th, 90th and 99th percentiles, standard deviation, beside the
throughput) and Tables 5-6 (the same for the gets and for the sets apart).

Each row comes from the bench instances' HdrHistograms of every repetition merged (exact to
three significant digits; never averaged percentiles), of all requests or of one request
type; the throughput is the configuration's mean over repetitions (of that type).
"""

from __future__ import annotations

import math

import pandas as pd

from ..results import ResultsSummary, merged_client_hdr

__all__ = ["response_statistics"]

_TYPES = (("all", "throughput", None), ("get", "throughput_get", "get"), ("set", "throughput_set", "set"))


def response_statistics(summary: ResultsSummary) -> pd.DataFrame | None:
    """One row per configuration and request type (``all``; ``get`` and ``set`` when the folder
    mixes them): requests, mean_ms, p50_ms, p90_ms, p99_ms, std_ms and throughput; None
    without the clients' histograms."""
    table = summary.table
    mixed = all(c in table and table[c].fillna(0).gt(0).any() for c in ("throughput_get", "throughput_set"))
    rows = []
    for _, row in table.iterrows():
        configuration = row["configuration"]
        run_ids = summary.run_ids(configuration)
        for kind, throughput, request_type in _TYPES if mixed else _TYPES[:1]:
            histogram = merged_client_hdr(summary.results, run_ids, request_type)
            if histogram is None or not histogram.total:
                continue
            record = {"configuration": configuration, **{c: row[c] for c in summary.display_columns},
                      "type": kind, "requests": histogram.total, "mean_ms": histogram.mean() / 1e3}
            record.update({f"p{q}_ms": histogram.value_at_quantile(q / 100) / 1e3 for q in (50, 90, 99)})
            record["std_ms"] = histogram.std() / 1e3
            record["throughput"] = float(row.get(throughput, math.nan))
            rows.append(record)
    return pd.DataFrame(rows) if rows else None
