"""The report's "Interactive response-time law" section (`analysis.interactive_law_table`):
R = N/X - Z and X = N/(R + Z) beside the measured values, the think time the law solves for,
and the configurations off by more than the tolerance."""

from __future__ import annotations

from ..analysis import interactive_law_table
from ..results import ResultsSummary
from . import _plots as plots
from ._document import Section, Table, present
from ._plots import report_figure


def interactive_section(summary: ResultsSummary, tolerance: float, think_time_ms: float | None) -> Section | None:
    frame = interactive_law_table(summary, tolerance, think_time_ms)
    if frame.empty:
        return None
    flagged = frame[~frame["consistent"]]
    text = [
        "R = N/X − Z and X = N/(R + Z) next to the measured values (N clients, X the clients' total "
        "throughput, its mean over repetitions; response times averaged over the same requests, i.e. weighted "
        "by each repetition's request count). "
        + (
            f"Z = {think_time_ms:g} ms (given), R measured on the clients."
            if think_time_ms is not None
            else "Where there is a middleware, R is its response time and Z the clients' minus the middleware's "
            "response time (seeds 000, 004); without middleware Z = 0 (the bench has no think time)."
        )
        + " Z = N/X − R is the think time the law solves for with R measured on the clients (seed 002 "
        "Table 5): close to 0 for the bench, which does not think; what it is above 0 is time the clients' "
        "R does not count."
        + f" A configuration is flagged when a prediction is more than {tolerance:.0%} off.",
        f"Flagged: {len(flagged)} of {len(frame)} configurations."
        + (" " + "; ".join(summary.label(r) for _, r in flagged.iterrows()) if len(flagged) else ""),
    ]
    return Section(
        "Interactive response-time law",
        text,
        present(
            Table(
                "interactive_law",
                "Interactive law: measured and predicted (ms, requests/s; deviations relative to the measured)",
                frame[[c for c in frame.columns if c != "think_time_from" and frame[c].astype(str).nunique() > 1
                       or c in ("configuration", "throughput", "response_time", "think_time_law", "consistent")]],
                csv=frame,
                units={"response_time": "ms", "think_time": "ms", "think_time_law": "ms",
                       "predicted_response_time": "ms",
                       "predicted_throughput": "rate", "response_time_deviation": "relative",
                       "throughput_deviation": "relative"},
            ),
            report_figure(
                "interactive_law",
                "Interactive law",
                plots.interactive_law_plot(frame, summary.x, summary.series) if summary.x else None,
            ),
        ),
    )
