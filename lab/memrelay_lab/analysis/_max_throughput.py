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

`best_per_group` finds it for each workload (and each block of a file with ``combinations``)
apart, as seed 000 Tables 3-5 and §2.3 give reads and writes their own configuration;
`maximum_table` lays both rules out as seed 000 Tables 3-5 do (per group, a row measured on
the middlewares and one on the clients: throughput, response time, time in queue, miss
rate): seed 000 reports the configuration with the maximum itself, seed 001 the smallest
reaching it; the report shows both. `knee_table` is seed 000 Table 6: per worker count, the smallest configuration reaching that
count's maximum (the knee of its throughput curve), with the "derived" throughput N / R_mw
(clients over the middleware's response time: what the middlewares alone would sustain).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from .._values import configuration_label

__all__ = ["MaxThroughput", "RESOURCE_ORDER", "best_per_group", "knee_table", "max_throughput", "maximum_table",
           "summary_groups"]

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


# Parameters whose values are separate experiments to the seeds, each with its own best.
GROUPS = ("block", "workload")


def summary_groups(table: pd.DataFrame) -> list[str]:
    """The columns of `GROUPS` that take several values in `table`."""
    return [c for c in GROUPS if c in table and table[c].nunique() > 1]


def best_per_group(table: pd.DataFrame, by: list[str]) -> list[tuple[dict, MaxThroughput]]:
    """`max_throughput` of each group of `by` (in table order), groups of fewer than two
    configurations left out."""
    found = []
    groups = table.groupby(by, sort=False) if by else [((), table)]
    for key, group in groups:
        result = max_throughput(group)
        if result is not None:
            found.append((dict(zip(by, key if isinstance(key, tuple) else (key,))), result))
    return found


_TABLES_3_TO_5 = (  # (label, the middlewares' column, the clients' column)
    ("throughput (ops/s)", "mw_throughput", "throughput"),
    ("response time (ms)", "mw_response_ms", "response_ms"),
    ("time in queue (ms)", "mw_queue_ms", None),
    ("miss rate", "mw_miss_rate", "miss_rate"),
)
RULES = (("maximum", "best"), ("smallest reaching it", "smallest"))


def maximum_table(per_group: list[tuple[dict, MaxThroughput]], configuration_columns: list[str]) -> pd.DataFrame:
    """Seed 000 Tables 3-5 for both rules: per group and rule ("maximum": seed 000's, the
    configuration with the highest throughput; "smallest reaching it": seed 001's) a row
    measured on the middlewares and one on the clients, the chosen configuration named by
    `configuration_columns`; NaN where a side does not measure a quantity (n/a in the seed)."""
    rows = []
    for where, found in per_group:
        for rule, attribute in RULES:
            chosen = getattr(found, attribute)
            named = configuration_label(chosen, [c for c in configuration_columns if c not in where and c in chosen])
            for side, index in (("middleware", 1), ("clients", 2)):
                record = {"group": configuration_label(where, empty="all"), "rule": rule, "configuration": named,
                          "measured on": side}
                for label, *columns in _TABLES_3_TO_5:
                    column = columns[index - 1]
                    record[label] = chosen.get(column, math.nan) if column else math.nan
                rows.append(record)
    return pd.DataFrame(rows)


_KNEE = (
    ("clients", "clients"),
    ("throughput, middleware (requests/s)", "mw_throughput"),
    ("throughput, derived N / R_mw (requests/s)", None),
    ("throughput, clients (requests/s)", "throughput"),
    ("time in queue (ms)", "mw_queue_ms"),
    ("queue length", "mw_queue_length"),
    ("time at the servers (ms)", "mw_service_ms"),
    ("response time, middleware (ms)", "mw_response_ms"),
    ("response time, clients (ms)", "response_ms"),
)


def knee_table(table: pd.DataFrame, by: str = "workers", within: list[str] | None = None) -> pd.DataFrame | None:
    """Seed 000 Table 6: one column per value of `by` (within each group of `within`, e.g. per
    workload), the measures of the smallest configuration reaching that value's maximum
    throughput; None unless `by` and the clients both vary."""
    if by not in table or table[by].nunique() < 2 or "clients" not in table or table["clients"].nunique() < 2:
        return None
    columns = {}
    for where, result in best_per_group(table, [*(within or []), by]):
        row = result.smallest
        column = {}
        for label, name in _KNEE:
            if name is None:
                response = row.get("mw_response_ms", math.nan)
                column[label] = row["clients"] / (response / 1e3) if response and response > 0 else math.nan
            else:
                column[label] = row.get(name, math.nan)
        columns[configuration_label(where)] = column
    if not columns:
        return None
    frame = pd.DataFrame(columns)
    frame.index.name = "measure"
    return frame.dropna(how="all")
