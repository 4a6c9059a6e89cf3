"""The report's "Checks" section: the consistency and validity checks of `analysis._checks`,
failures first, with what each would take to pass."""

from __future__ import annotations

import math

import pandas as pd

from ..analysis import DEFAULT_CHECK_TARGET as DEFAULT_TARGET
from ..analysis import checks_frame, consistency_checks, net_thread_utilization_checks
from ..results import ResultsSummary
from ._document import Section, Table


def checks_section(results, summary: ResultsSummary, tolerance: float) -> Section | None:
    columns = summary.display_columns
    checks = consistency_checks(results, tolerance=tolerance, level=summary.level, config_columns=columns)
    checks += net_thread_utilization_checks(summary.pooled_table(), columns)
    frame = checks_frame(checks)
    if frame.empty:
        return None
    counts = frame.groupby(["check", "verdict"]).size().unstack(fill_value=0)
    for verdict in ("pass", "FAIL", "skipped"):
        if verdict not in counts:
            counts[verdict] = 0
    counts = counts[["pass", "FAIL", "skipped"]].reset_index()
    counts["expected"] = [frame.loc[frame["check"] == name, "expected"].iloc[0] for name in counts["check"]]
    failed = frame[frame["verdict"] == "FAIL"]
    text = [
        "Checks that can fail (`memrelay-lab check` prints them and exits 1 on a failure): the laws that hold "
        "between figures different programs counted (memrelay-bench, memrelay, memcached's own `stats`), the "
        f"stationarity of each run's kept windows, and confidence intervals against ±{DEFAULT_TARGET:.0%} of the mean. "
        f"{len(failed)} of {len(frame)} checks fail."
    ]
    items = [Table("checks_summary", "Checks: how many passed, failed and could not be made", counts)]
    if not failed.empty:
        shown = failed[["check", "scope", "value", "detail"]].copy()
        shown["value"] = [f"{v:,.3f}" if math.isfinite(v) else "–" for v in shown["value"]]
        items.append(Table("checks_failed", "Failed checks", shown.reset_index(drop=True), csv=failed))
    skipped = frame[frame["verdict"] == "skipped"]
    if not skipped.empty:
        reasons = skipped.groupby(["check", "detail"]).size().reset_index(name="count")
        items.append(Table("checks_skipped", "Checks that could not be made, and why", pd.DataFrame(reasons)))
    return Section("Checks", text, items)
