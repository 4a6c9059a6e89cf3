"""Mixed workloads: gets and sets apart (seed 001 §2–3, seed 000 §6 Tables 17–20). A workload that
both reads and writes has two populations of requests with different paths (a set goes to every
replica, a get to one server), so one mean hides both: per configuration, each type's throughput
and mean response time (with their intervals over repetitions) and its percentiles from the
clients' per-type HdrHistograms merged over the repetitions."""

from __future__ import annotations

import math

import pandas as pd

from ..results import ResultsSummary, merged_client_hdr

__all__ = ["TYPES", "mixed_workload_table"]

TYPES = ("get", "set")
QUANTILES = (("p50", 0.50), ("p90", 0.90), ("p99", 0.99))


def mixed_workload_table(summary: ResultsSummary) -> pd.DataFrame | None:
    """One row per configuration that ran both gets and sets (None when none did): the display
    columns, then per type `throughput_<type>`, `response_<type>_ms` (means, with
    `_half_width`) and `response_<type>_<pNN>_ms` (merged histograms)."""
    table = summary.table
    needed = [f"throughput_{t}" for t in TYPES]
    if any(c not in table for c in needed):
        return None
    mixed = table[(table["throughput_get"] > 0) & (table["throughput_set"] > 0)]
    if mixed.empty:
        return None
    rows = []
    for _, row in mixed.iterrows():
        record = {c: row[c] for c in ("configuration", *summary.display_columns)}
        for kind in TYPES:
            for measure in (f"throughput_{kind}", f"response_{kind}_ms"):
                record[measure] = row.get(measure, math.nan)
                record[f"{measure}_half_width"] = row.get(f"{measure}_half_width", math.nan)
            histogram = merged_client_hdr(summary.results, summary.run_ids(int(row["configuration"])), kind)
            for name, q in QUANTILES:
                value = histogram.value_at_quantile(q) / 1000 if histogram is not None and histogram.total else math.nan
                record[f"response_{kind}_{name}_ms"] = value
        rows.append(record)
    return pd.DataFrame(rows)
