"""Relative differences against a base level (seed 001 §2-3, Tables 7-16).

Seed 001 compares configurations by the change of a measure when one parameter moves away from
its first level, the others fixed: 100 (y - x) / x, x the base case's value (no replication for
the replication factor, 3 servers for the number of servers, 1 % writes for the write share).
`relative_differences(table, vary, measures)` gives, for every combination of the other swept
parameters and every measure, one column per other level of `vary` ("none to half", ...).
Levels keep the order of the experiment file (the order of the configurations).
"""

from __future__ import annotations

import math

import pandas as pd

from .._values import configuration_label

__all__ = ["RELATIVE_MEASURES", "relative_differences"]

# The clients' measures seed 001 compares: per type (Tables 7-14), then overall (Tables 15-16).
RELATIVE_MEASURES = (
    ("throughput_get", "get throughput"),
    ("throughput_set", "set throughput"),
    ("response_get_ms", "get response time"),
    ("response_set_ms", "set response time"),
    ("throughput", "throughput"),
    ("response_ms", "response time"),
)


def relative_differences(table: pd.DataFrame, vary: str, others: list[str],
                         measures=RELATIVE_MEASURES) -> pd.DataFrame | None:
    """Rows (measure, the others' values), one column "<base> to <level>" per non-base level of
    `vary`, values in percent; None when `vary` has fewer than two levels."""
    levels = list(dict.fromkeys(table[vary].tolist()))
    if len(levels) < 2:
        return None
    base, rest = levels[0], levels[1:]
    rows = []
    groups = table.groupby(others, sort=False) if others else [((), table)]
    for name, label in measures:
        if name not in table or table[name].isna().all():
            continue
        for key, group in groups:
            where = dict(zip(others, key if isinstance(key, tuple) else (key,)))
            by_level = group.groupby(vary, sort=False)[name].mean()
            x = by_level.get(base, math.nan)
            record = {"measure": label, "fixed": configuration_label(where)}
            for level in rest:
                y = by_level.get(level, math.nan)
                record[f"{base} to {level}"] = 100.0 * (y - x) / x if x and not math.isnan(x) else math.nan
            rows.append(record)
    return pd.DataFrame(rows) if rows else None
