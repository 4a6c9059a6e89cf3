"""The report's "Configurations" section: one row per configuration with each measure as "mean ±
half width" over the repetitions, one table per concern so each fits a page, intervals wider than
the target marked; and the full-precision summary, runs and parameters as CSV."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..results import ResultsSummary
from ._document import Section, Table
from ._format import CI_TARGET, WIDE_MARK, format_interval


# The configuration table split by concern, so that each fits a page: (table name, caption,
# measures shown as "mean ± half width").
_CONCERNS = (
    ("summary_throughput", "Throughput (requests/s; keys read/s)", ("throughput", "mw_throughput", "keys_throughput")),
    ("summary_response_time", "Response time (ms), clients and middleware", ("response_ms", "mw_response_ms")),
    (
        "summary_breakdown",
        "Where the middleware's time goes (ms) and its queue length",
        ("mw_queue_ms", "mw_service_ms", "mw_other_ms", "network_ms", "mw_queue_length"),
    ),
    ("summary_errors", "Misses and errors (fraction of requests)", ("miss_rate", "error_rate")),
)


def interval_frame(summary: ResultsSummary, measures: Sequence[str]) -> pd.DataFrame:
    """The configurations with one "mean ± half width" text column per measure (those with data)."""
    table = summary.table
    frame = table[["configuration", *summary.display_columns, "repetitions"]].copy()
    for measure in measures:
        if measure not in table or not table[measure].notna().any():
            continue
        half = table.get(f"{measure}_half_width", pd.Series(np.nan, index=table.index))
        frame[measure] = [
            format_interval(m, h, measure, int(r)) for m, h, r in zip(table[measure], half, table["repetitions"])
        ]
    return frame


def configurations_section(summary: ResultsSummary) -> Section:
    target = f"{CI_TARGET:.0%}"
    text = [
        "One row per configuration, one table per concern. `throughput` and `response_ms` are measured on the "
        "clients, `mw_*` on the middlewares; `mw_other_ms` is the middleware's response time minus queue and "
        "service time, `network_ms` the clients' minus the middlewares' response time. Each cell is the mean "
        f"over repetitions ± the half width of its {summary.level:.0%} confidence interval. "
        f"{WIDE_MARK} marks an interval whose half width exceeds {target} of the mean (the target of these "
        "tables; the percentage is the half width relative to the mean): too wide to support a comparison, "
        "add repetitions or lengthen the runs. With one repetition there is no interval (\"no interval\").",
    ]
    if (summary.table["repetitions"] < 2).any():
        text.append(
            f"{WIDE_MARK} Some configurations have repetitions = 1: their means come without confidence intervals."
        )
    items: list = []
    for name, caption, measures in _CONCERNS:
        frame = interval_frame(summary, measures)
        if len(frame.columns) > len(summary.display_columns) + 2:
            items.append(Table(name, caption, frame))
    wide = sum(cell.count(WIDE_MARK) for item in items for column in item.frame.columns[2:]
               for cell in item.frame[column].astype(str))
    if wide:
        text.append(f"{WIDE_MARK} {wide} intervals are wider than {target} of their mean.")
    configurations_frame = summary.table[["configuration", *summary.config_columns]]
    items += [
        Table("summary", "Means and half widths at full precision", summary.table.head(0), csv=summary.table),
        Table("runs", "Every run (one row per repetition)", summary.runs.head(0), csv=summary.runs),
        Table(
            "configurations", "Every configuration's parameters", configurations_frame.head(0),
            csv=configurations_frame,
        ),
    ]
    return Section("Configurations", text, items)
