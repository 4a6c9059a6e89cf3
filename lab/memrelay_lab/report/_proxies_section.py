"""The report's "Proxies compared" section: for a folder that sweeps the middleware program
(memrelay, twemproxy, memcached's proxy), each program's throughput and response-time curves
with their intervals, its processor time per request, and the bottleneck the model names.

All three are compared on what the lab measures from outside alike (the clients, each
process's processor time by the utilization law), since only memrelay measures inside itself.
"""

from __future__ import annotations

import math

import pandas as pd

from ..analysis import named_bottlenecks
from ..results import ResultsSummary
from . import _plots as plots
from ._document import Figure, Section, Table

__all__ = ["proxies_section"]

PROGRAM = "middleware"


def proxies_section(summary: ResultsSummary) -> Section | None:
    table = summary.table
    if PROGRAM not in table or table[PROGRAM].astype(str).isin(["none"]).all():
        return None
    programs = [p for p in table[PROGRAM].astype(str).unique() if p != "none"]
    if len(programs) < 2:
        return None
    x = summary.x or "clients"
    by = [PROGRAM] + [c for c in summary.series if c != PROGRAM]
    level = summary.level
    items: list[Table | Figure] = []
    for name, caption, figure in (
        ("proxies_throughput", "Throughput per middleware program",
         plots.throughput_plot(table, x, by, level)),
        ("proxies_response_time", "Response time per middleware program",
         plots.response_time_plot(table, x, by, level)),
    ):
        if figure is not None:
            items.append(Figure(name, caption, plots.png_bytes(figure)))
    items.append(Table("proxies_compared", "Each program at each configuration (clients' measures, "
                       f"mean ± half width of the {level:.0%} interval; processor time per request by the "
                       "utilization law)", _comparison(summary, x, by)))
    text = [
        "The middleware programs side by side, each started with memrelay's routing as far as it can follow it "
        "(lab/memrelay_lab/experiment/_proxies.py). twemproxy and memcached's proxy have no internal timestamps: "
        "all three are compared on what the clients measured and on each process's processor time (µs per "
        "request: the program's user + system time over the kept interval divided by the requests the clients "
        "completed in it). The bottleneck is the prediction model's (section Predictions): the resource the "
        "model calibrated on this folder finds busiest at each configuration."
    ]
    return Section("Proxies compared", text, items)


def _comparison(summary: ResultsSummary, x: str, by: list[str]) -> pd.DataFrame:
    table = summary.table
    keys = [c for c in summary.display_columns if c in table]
    bottlenecks = named_bottlenecks(summary.pooled_table(), summary.config_columns, keys)
    rows = []
    for _, row in table.sort_values([*by, x]).iterrows():
        cpu = row.get("cpu_middleware_us", math.nan)
        rows.append({
            "middleware": row[PROGRAM],
            **{c: row[c] for c in (x, *by[1:]) if c in row},
            "throughput (req/s)": _mean_half(row, "throughput", 0),
            "response time (ms)": _mean_half(row, "response_ms", 3),
            "p99 (ms)": _mean_half(row, "response_p99_ms", 3),
            "middleware CPU (µs/request)": _mean_half(row, "cpu_middleware_us", 1) if pd.notna(cpu) else "–",
            "all processes' CPU (µs/request)": _mean_half(row, "cpu_total_us", 1),
            "bottleneck (model)": bottlenecks.get(tuple(str(row[c]) for c in keys), "–"),
        })
    return pd.DataFrame(rows)


def _number(value, digits: int) -> str:
    return "–" if value is None or not math.isfinite(float(value)) else f"{float(value):,.{digits}f}"


def _mean_half(row: pd.Series, column: str, digits: int) -> str:
    mean = row.get(column, math.nan)
    half = row.get(f"{column}_half_width", math.nan)
    if mean is None or not math.isfinite(float(mean)):
        return "–"
    if half is None or not math.isfinite(float(half)):
        return f"{float(mean):,.{digits}f} (no interval)"
    return f"{float(mean):,.{digits}f} ± {float(half):,.{digits}f}"
