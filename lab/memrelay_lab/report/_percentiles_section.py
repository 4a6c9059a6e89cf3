"""The report's "Percentiles and histograms" section (seed 000 §5, seed 001 Tables 1-6): response
time percentiles from histograms merged over the repetitions (never averaged), against the
multi-get size when it was swept, and the response-time histograms of clients and middleware for
one configuration per series (multi-gets of 6 keys, as seed 000 Figure 26, when they were run)."""

from __future__ import annotations

import re

from ..analysis import response_statistics
from ..results import ResultsSummary, merged_buckets
from . import _plots as plots
from ._document import Section, Table, present
from ._plots import report_figure

MAX_HISTOGRAM_PANELS = 4
# Seed 000 §5.3 (Figure 26) shows the histograms of multi-gets of 6 keys.
SEED_HISTOGRAM_MULTIGET = 6


def percentiles_section(summary: ResultsSummary) -> Section | None:
    percentiles = summary.percentiles
    if percentiles.empty:
        return None
    shown = ["configuration", *summary.display_columns, "side", "requests", "mean_ms"]
    shown += [c for c in percentiles.columns if re.fullmatch(r"p[0-9_]+_ms", c)]
    items: list = [Table("percentiles", "Response time percentiles from merged histograms (ms)", percentiles[shown])]
    statistics = response_statistics(summary)
    if statistics is not None:
        items.append(Table("response_time_statistics", "Response time statistics and throughput on the clients, "
                           "all requests and, with reads and writes, gets and sets apart (seed 001 Tables 1-3 and "
                           "5-6: mean, percentiles and standard deviation in ms; throughput in requests/s)",
                           statistics))
    if "multiget" in summary.swept:
        by = [c for c in summary.display_columns if c != "multiget"]
        items += present(
            report_figure(
                "percentiles_clients",
                "Percentiles on the clients against the multi-get size",
                plots.percentiles_plot(percentiles, "multiget", by, "clients"),
            ),
            report_figure(
                "percentiles_middleware",
                "Percentiles on the middleware against the multi-get size",
                plots.percentiles_plot(percentiles, "multiget", by, "middleware"),
            ),
        )
    panels = []
    for configuration in _histogram_choices(summary):
        row = summary.table.loc[summary.table["configuration"] == configuration].iloc[0]
        run_ids = summary.run_ids(configuration)
        runs = summary.runs[summary.runs["configuration"] == configuration]
        client = merged_buckets(summary.results, run_ids, "clients")
        client_seconds = float(runs["duration_s"].sum())
        client = client.scaled(1.0 / client_seconds) if client and client_seconds > 0 else client
        middleware = None
        if runs["mw_response_ms"].notna().any():
            middleware = merged_buckets(summary.results, run_ids, "middleware")
            mw_seconds = float(runs["mw_duration_s"].sum())
            middleware = middleware.scaled(1.0 / mw_seconds) if middleware and mw_seconds > 0 else middleware
        panels.append((summary.label(row), client, middleware))
    items += present(
        report_figure("histograms", "Response-time histograms, clients and middleware", plots.histograms_plot(panels))
    )
    return Section(
        "Percentiles and histograms",
        [
            "Percentiles read from the histograms of all repetitions merged. Histograms: 100 µs buckets, requests "
            "per second of run (counts divided by the runs' total duration), for "
            + (f"multi-gets of {histogram_multiget(summary.table['multiget'])} keys (seed 000 §5.3, Figure 26: 6 keys; "
               "the middle size when 6 was not run)" if "multiget" in summary.swept
               else "the most loaded configuration")
            + " of each series."
        ],
        items,
    )


def histogram_multiget(sizes) -> int:
    """The multi-get size whose histograms the report shows: the seed's 6 keys when it was run,
    else the middle size."""
    sizes = sorted(int(k) for k in set(sizes))
    return SEED_HISTOGRAM_MULTIGET if SEED_HISTOGRAM_MULTIGET in sizes else sizes[(len(sizes) - 1) // 2]


def _histogram_choices(summary: ResultsSummary) -> list[int]:
    table = summary.table
    if "multiget" in summary.swept:
        chosen = table[table["multiget"] == histogram_multiget(table["multiget"])]
    else:
        chosen = table
    by = [c for c in summary.series if c != "multiget" and c in chosen]
    key = summary.x if summary.x in chosen and summary.x != "multiget" else "clients"
    picks = []
    groups = chosen.groupby(by, sort=True, dropna=False) if by else [(None, chosen)]
    for _, group in groups:
        picks.append(int(group.sort_values(key).iloc[-1]["configuration"]))
    return picks[:MAX_HISTOGRAM_PANELS]
