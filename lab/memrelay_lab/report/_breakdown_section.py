"""The report's "Time breakdown" section (seed 000 Figures 9, 11, 21, 23): where a request's time
goes, memrelay's queue, the servers, the rest of the middleware and the network."""

from __future__ import annotations

from ..results import ResultsSummary
from . import _plots as plots
from ._document import Section, present
from ._plots import report_figure


def breakdown_section(summary: ResultsSummary) -> Section | None:
    if summary.x is None:
        return None
    figure = plots.time_breakdown_plot(summary.table, summary.x, summary.series, summary.level)
    if figure is None:
        return None
    return Section(
        "Time breakdown",
        [
            "Where a request's time goes: waiting in memrelay's request queue, at the servers (service time), in "
            "the rest of the middleware (net thread, routing, writing the reply) and outside it (network both ways "
            "and the client; client-side minus middleware-side response time)."
        ],
        present(report_figure("time_breakdown", "Time breakdown", figure)),
    )
