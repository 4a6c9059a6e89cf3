"""The report's "Throughput and response time" section (seed 000 §2-4, seed 001 Figures 7-8):
the clients' throughput and response time against the swept parameter, one line per value of the
others, with confidence intervals as error bars and a note on those wider than the target."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..results import ResultsSummary
from . import _plots as plots
from ._document import Section, present
from ._format import CI_TARGET, WIDE_MARK, interval_warning
from ._plots import report_figure


def throughput_section(summary: ResultsSummary) -> Section | None:
    if summary.x is None:
        return None
    x, by, level = summary.x, summary.series, summary.level
    return Section(
        "Throughput and response time",
        [
            f"Measured on the clients, against {plots.axis_label(x).lower()}; "
            f"error bars: {level:.0%} confidence intervals." + _wide_note(summary, ("throughput", "response_ms"))
        ],
        present(
            report_figure("throughput", "Throughput", plots.throughput_plot(summary.table, x, by, level)),
            report_figure("response_time", "Response time", plots.response_time_plot(summary.table, x, by, level)),
            *(report_figure(f"throughput_{kind}", f"{kind} throughput (seed 001 Figures 7-8)",
                            plots.throughput_per_type_plot(summary.table, x, by, level, kind))
              for kind in ("get", "set")),
        ),
    )


def _wide_note(summary: ResultsSummary, measures: Sequence[str]) -> str:
    """" ⚠ N of M error bars ..." when some plotted intervals are wider than the target."""
    table, wide, total = summary.table, 0, 0
    for measure in measures:
        if measure not in table or f"{measure}_half_width" not in table:
            continue
        for mean, half in zip(table[measure], table[f"{measure}_half_width"]):
            if np.isfinite(mean):
                total += 1
                wide += bool(interval_warning(mean, half))
    if not wide:
        return ""
    return (f" {WIDE_MARK} {wide} of these {total} intervals have a half width above {CI_TARGET:.0%} of the mean "
            "(or none, with one repetition): differences between those points are not established.")
