"""The report's "Relative differences" section (`analysis.relative_differences`, seed 001 §2-3,
Tables 7-16): how each measure changes when one swept parameter leaves its first level, the
others fixed. For folders that sweep several parameters at a fixed population and are no 2^k
design (seed 001's effect of replication and of writes)."""

from __future__ import annotations

from ..analysis import factorial_factors, relative_differences
from ..results import ResultsSummary
from ._document import Section, Table
from ._render import slug


def relative_section(summary: ResultsSummary) -> Section | None:
    swept = [c for c in summary.swept if c in summary.table]
    if len(swept) < 2 or "clients" in summary.display_columns or factorial_factors(summary)[0] is not None:
        return None
    items = []
    for vary in swept:
        others = [c for c in swept if c != vary]
        frame = relative_differences(summary.table, vary, others)
        if frame is None:
            continue
        percent = {c: "percent" for c in frame.columns if " to " in c}
        items.append(Table(f"relative_{slug(vary).replace('-', '_')}",
                           f"Relative difference against {vary}={frame.columns[2].split(' to ')[0]} (%)", frame,
                           units=percent))
    if not items:
        return None
    text = [
        "100 (y − x) / x: the change of each of the clients' measures when one parameter leaves its first level "
        "(x, the base case) with the others fixed, as seed 001 compares its setups: Tables 7–10 (throughput of gets "
        "and sets for a growing replication factor and number of servers), 11–14 (their average response times) "
        "and 15–16 (throughput and response time for a growing write share, full replication). Means over the "
        "repetitions; a difference smaller than the measures' confidence intervals (in the throughput and "
        "response-time tables) is no difference."
    ]
    return Section("Relative differences", text, items)
