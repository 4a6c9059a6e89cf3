"""The report's "Values read per second" section (seed 000 Figure 27): keys asked for by gets and
multi-gets per second on the clients, against the multi-get size."""

from __future__ import annotations

from ..results import ResultsSummary
from . import _plots as plots
from ._document import Section, present
from ._plots import report_figure


def keys_section(summary: ResultsSummary) -> Section | None:
    if "multiget" not in summary.swept or "keys_throughput" not in summary.table:
        return None
    by = [c for c in summary.display_columns if c != "multiget"]
    figure = plots.keys_per_second_plot(summary.table, "multiget", by, summary.level)
    if figure is None:
        return None
    return Section(
        "Values read per second",
        ["Keys asked for by get and multi-get requests per second, on the clients (seed 000 Figure 27)."],
        present(report_figure("keys_per_second", "Keys read per second", figure)),
    )
