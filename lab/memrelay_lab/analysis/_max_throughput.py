"""The maximum-throughput configuration and the smallest one that reaches it (seed 000 §3.4
Tables 3–5; seed 001 §1.2: "the minimum combination of clients and threads that achieves the
maximum throughput").

Reaching it is a statistical statement: a configuration reaches the maximum when its
throughput's confidence interval overlaps the best one's (the difference is not significant at
the report's level). Among those, the smallest uses the fewest resources: fewest middlewares,
then fewest worker threads, then fewest clients (connections and memory; seed 001 rules out 40
threads for 16 or 24 "with no significant throughput gain"). Its summary is the seeds' table:
throughput, response time, time in queue, time at the servers, queue length and miss rate, as
the clients and as the middlewares measured them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

__all__ = ["MaxThroughput", "RESOURCE_ORDER", "max_throughput"]

# The resources a configuration uses, most expensive first.
RESOURCE_ORDER = ("middlewares", "workers", "clients")
_SUMMARY = (
    ("throughput (requests/s)", "throughput", "mw_throughput"),
    ("response time (ms)", "response_ms", "mw_response_ms"),
    ("time in queue (ms)", None, "mw_queue_ms"),
    ("time at the servers (ms)", None, "mw_service_ms"),
    ("queue length", None, "mw_queue_length"),
    ("miss rate", "miss_rate", "mw_miss_rate"),
)


@dataclass(frozen=True)
class MaxThroughput:
    best: pd.Series
    smallest: pd.Series
    candidates: pd.DataFrame  # every configuration that reaches the maximum, smallest first
    resources: tuple[str, ...]

    def summary(self, row: pd.Series | None = None) -> pd.DataFrame:
        """The seeds' Tables 3–5 for `row` (default: the smallest that reaches the maximum):
        one row per measure, clients' and middlewares' figures with their half widths."""
        row = self.smallest if row is None else row
        records = []
        for label, clients, middleware in _SUMMARY:
            record = {"measure": label}
            for side, column in (("clients", clients), ("middleware", middleware)):
                value = row.get(column, math.nan) if column else math.nan
                record[side] = value
                record[f"{side}_half_width"] = row.get(f"{column}_half_width", math.nan) if column else math.nan
            if not (pd.isna(record["clients"]) and pd.isna(record["middleware"])):
                records.append(record)
        return pd.DataFrame(records)


def max_throughput(table: pd.DataFrame) -> MaxThroughput | None:
    """The best and the smallest configuration reaching it in a summary table (means and
    `_half_width` columns); None with fewer than two configurations."""
    data = table[table["throughput"].notna()] if "throughput" in table else table.iloc[0:0]
    if len(data) < 2:
        return None
    best = data.loc[data["throughput"].idxmax()]
    half = data.get("throughput_half_width", pd.Series(0.0, index=data.index)).fillna(0.0)
    best_half = 0.0 if pd.isna(best.get("throughput_half_width")) else float(best["throughput_half_width"])
    reaches = data[data["throughput"] + half >= best["throughput"] - best_half]
    resources = tuple(c for c in RESOURCE_ORDER if c in data and data[c].nunique() > 1) or ("clients",)
    ordered = reaches.sort_values([*resources, "throughput"], ascending=[True] * len(resources) + [False])
    return MaxThroughput(best=best, smallest=ordered.iloc[0], candidates=ordered, resources=resources)
