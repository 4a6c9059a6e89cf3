"""The report's "Overview" section: the experiment's description, the runs and their status,
what was swept and how the report reads it, where the processes ran (`_machines_section`), and
the runs that did not complete."""

from __future__ import annotations

from ..results import ResultsSummary
from . import _plots as plots
from ._document import Section, Table
from ._machines_section import machines_overview


def overview_section(results, summary: ResultsSummary) -> Section:
    experiment = results.manifest.get("experiment", {})
    status = results.status["status"].value_counts().to_dict() if not results.status.empty else {}
    counts = ", ".join(f"{n} {s}" for s, n in status.items())
    text = []
    if experiment.get("description"):
        text.append(str(experiment["description"]))
    profile = f" (profile {experiment['profile']})" if experiment.get("profile") else ""
    text.append(
        f"Results folder `{results.path}`{profile}: {len(summary.table)} configurations, runs: {counts}. "
        f"Means over repetitions with {summary.level:.0%} confidence intervals (Student t, r - 1 degrees of "
        "freedom); throughput summed over the bench instances; middleware times combined over middlewares "
        "weighted by request count; means from the windows left after trimming warm-up and cool-down."
    )
    if summary.swept:
        axis = f"; plots against {plots.axis_label(summary.x).lower()}" if summary.x else ""
        lines = f", one line per {', '.join(summary.series)}" if summary.series else ""
        text.append(f"Swept parameters: {', '.join(summary.swept)}{axis}{lines}.")
    text.append(
        "Percentiles come from histograms merged over all repetitions (and bench instances, and middlewares), "
        "never from averaged percentiles: the clients' HdrHistograms (3 significant digits) and the middlewares' "
        "100 µs buckets (interpolated inside the bucket). Histograms cover whole runs, warm-up and cool-down "
        "included."
    )
    sizes = summary.runs["value_size"].dropna().unique() if "value_size" in summary.runs else []
    machines_text, machines_tables = machines_overview(results.manifest, int(sizes[0]) if len(sizes) == 1 else None)
    text += machines_text
    failed = results.status[results.status["status"] != "completed"] if not results.status.empty else None
    items: list = [*machines_tables]
    if failed is not None and not failed.empty:
        items.append(Table("runs_not_completed", "Runs that did not complete", failed[["run_id", "status", "reason"]]))
    return Section("Overview", text, items)
