"""The report's "Maximum throughput" section (`analysis._max_throughput`): the configurations
that reach the best throughput within its interval, the smallest of them, and the seeds' summary
table for it (seed 000 §3.4 Tables 3–5, seed 001 §1.2)."""

from __future__ import annotations

import math

from ..analysis import max_throughput
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
    table = found.summary()
    shown = table[["measure"]].copy()
    for side in ("clients", "middleware"):
        shown[side] = [
            "–" if math.isnan(v) else (f"{format_number(v, m)} ± {format_number(h, m)}" if not math.isnan(h) else format_number(v, m))
            for v, h, m in zip(table[side], table[f"{side}_half_width"], table["measure"].map(_unit))
        ]
    text = [
        f"The best throughput was {format_number(found.best['throughput'], 'throughput')} requests/s "
        f"({label(found.best)}). A configuration reaches it when its throughput's {summary.level:.0%} interval "
        "overlaps the best one's (the difference is not significant); of those, the smallest uses the fewest "
        f"{', then the fewest '.join(found.resources)} (seed 001 §1.2: the minimum combination of clients and "
        f"threads that achieves the maximum). Smallest: {label(found.smallest)}."
    ]
    return Section("Maximum throughput", text, [
        Table("max_throughput_candidates", "Configurations that reach the maximum throughput, smallest first",
              candidates, csv=found.candidates),
        Table("max_throughput_summary", f"The smallest of them, {label(found.smallest)} (seed 000 §3.4 Tables 3–5)",
              shown, csv=table),
    ])


def _unit(measure: str) -> str:
    if "(ms)" in measure:
        return "response_ms"
    if "requests/s" in measure:
        return "throughput"
    if "rate" in measure:
        return "miss_rate"
    return "queue_length"
