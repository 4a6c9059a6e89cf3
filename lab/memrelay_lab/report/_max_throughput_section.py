"""The report's "Maximum throughput" section (`analysis._max_throughput`): the configurations
that reach the best throughput within its interval, the maximum itself (seed 000 §3.4 Tables
3–5's rule) and the smallest reaching it (seed 001 §1.2's), each with the seeds' summary table."""

from __future__ import annotations

import math

import pandas as pd

from .._values import configuration_label
from ..analysis import best_per_group, knee_table, max_throughput, maximum_table, summary_groups
from ..results import ResultsSummary
from ._document import Section, Table
from ._format import format_interval, format_number


def max_throughput_section(summary: ResultsSummary) -> Section | None:
    found = max_throughput(summary.table)
    if found is None:
        return None
    columns = list(summary.display_columns)
    label = lambda row: summary.label(row, columns)  # noqa: E731
    candidates = found.candidates[columns].copy()
    for measure, name in (("throughput", "X (req/s)"), ("response_ms", "R (ms)")):
        candidates[name] = [
            format_interval(m, h, measure, int(r))
            for m, h, r in zip(found.candidates[measure], found.candidates.get(f"{measure}_half_width"),
                               found.candidates["repetitions"] if "repetitions" in found.candidates else [0] * len(candidates))
        ]
    candidates["role"] = [
        "smallest" if c == found.smallest["configuration"] else ("best" if c == found.best["configuration"] else "")
        for c in found.candidates["configuration"]
    ]
    text = [
        f"The best throughput was {format_number(found.best['throughput'], 'throughput')} requests/s "
        f"({label(found.best)}): the maximum configuration, which seed 000 §3.4 reports (Tables 3–5). A "
        f"configuration reaches it when its throughput's {summary.level:.0%} interval overlaps the best one's "
        "(the difference is not significant); of those, the smallest uses the fewest "
        f"{', then the fewest '.join(found.resources)} (seed 001 §1.2: the minimum combination of clients and "
        f"threads that achieves the maximum). Smallest: {label(found.smallest)}. Both are shown."
    ]
    items = [
        Table("max_throughput_candidates", "Configurations that reach the maximum throughput, smallest first",
              candidates, csv=found.candidates),
        _summary_table("max_throughput_summary_maximum", f"The maximum, {label(found.best)} (seed 000 §3.4 "
                       "Tables 3–5)", found.summary(found.best)),
        _summary_table("max_throughput_summary", f"The smallest reaching it, {label(found.smallest)} (seed 001 "
                       "§1.2)", found.summary()),
    ]
    by = summary_groups(summary.table)
    per_group = best_per_group(summary.table, by) if by else []
    if per_group:
        text.append(
            f"Reads and writes are separate experiments to the seeds: one best configuration per {' and '.join(by)} "
            "(seed 000 §3.4 Tables 3–5, one table per block with a column for reads and one for writes; §2.3 for "
            "the baselines without middleware), the smallest reaching that group's maximum by the same rule."
        )
        items.append(Table("max_throughput_per_group", f"The smallest configuration reaching the maximum, per "
                           f"{' and '.join(by)} (seed 000 Tables 3–5, §2.3)", _per_group_frame(per_group, summary),
                           units={"miss rate": "probability"}))
    if per_group or found is not None:
        groups = per_group or [({}, found)]
        items.append(Table("max_throughput_tables_3_to_5", "Seed 000 Tables 3–5's layout, both rules: the maximum "
                           "and the smallest reaching it, measured on the middlewares and on the clients (– : not "
                           "measured on that side, n/a in the seed)",
                           maximum_table(groups, list(summary.display_columns)),
                           units={"miss rate": "probability", "throughput (ops/s)": "rate",
                                  "response time (ms)": "ms", "time in queue (ms)": "ms"}))
    knee = knee_table(summary.table, within=by)
    if knee is not None:
        text.append(
            "Per worker count, the smallest configuration reaching that count's maximum throughput: the knee of "
            "its curve (seed 000 §4.2 Table 6). The derived throughput is N / R_mw, the clients over the "
            "middleware's response time: what the middlewares would sustain without the network to the clients, "
            "hence above the measured one."
        )
        items.append(Table("knee_per_workers", "The knee per worker count (seed 000 Table 6)", knee, index=True,
                           row_units={"clients": "count", "queue length": "jobs"}))
    return Section("Maximum throughput", text, items)


def _summary_table(name: str, title: str, table: pd.DataFrame) -> Table:
    shown = table[["measure"]].copy()
    for side in ("clients", "middleware"):
        shown[side] = [
            "–" if math.isnan(v) else (f"{format_number(v, m)} ± {format_number(h, m)}" if not math.isnan(h)
                                       else format_number(v, m))
            for v, h, m in zip(table[side], table[f"{side}_half_width"], table["measure"].map(_unit))
        ]
    return Table(name, title, shown, csv=table)


_PER_GROUP = (("X clients (req/s)", "throughput"), ("X middleware (req/s)", "mw_throughput"),
              ("R clients (ms)", "response_ms"), ("R middleware (ms)", "mw_response_ms"),
              ("queue (ms)", "mw_queue_ms"), ("servers (ms)", "mw_service_ms"), ("miss rate", "miss_rate"))


def _per_group_frame(per_group, summary: ResultsSummary) -> pd.DataFrame:
    rows = []
    columns = [c for c in summary.display_columns]
    for where, found in per_group:
        row = found.smallest
        record = {"group": configuration_label(where),
                  "configuration": summary.label(row, [c for c in columns if c not in where])}
        for label, name in _PER_GROUP:
            if name in row and not pd.isna(row[name]):
                record[label] = row[name]
        rows.append(record)
    return pd.DataFrame(rows)


def _unit(measure: str) -> str:
    if "(ms)" in measure:
        return "response_ms"
    if "requests/s" in measure:
        return "throughput"
    if "rate" in measure:
        return "miss_rate"
    return "queue_length"
