"""The report's "2^k r factorial design" section (`analysis.factorial_results`, seed 000 §6,
Tables 7-20): for a folder that is a 2^k r design, the sign table, the allocation of variation
and the effects with their confidence intervals of each of the clients' responses; for another
swept folder, why it is not one."""

from __future__ import annotations

import pandas as pd

from ..analysis import factorial_factors, factorial_results
from ..results import ResultsSummary
from . import _plots as plots
from ._document import Section, Table, present
from ._format import CI_TARGET, WIDE_MARK, interval_warning
from ._plots import report_figure
from ._render import slug


def factorial_section(summary: ResultsSummary) -> Section | None:
    plan, reason = factorial_factors(summary)
    if plan is None:
        return Section("2^k r factorial design", [f"Not analysed: {reason}."]) if summary.swept else None
    analyses = factorial_results(summary)
    if not analyses:
        return Section("2^k r factorial design", [f"Not analysed: a {reason}, but without complete measurements."])
    levels = next(iter(analyses.values())).levels  # each factor's (low, high), coded -1 and +1
    text = [
        f"A {reason} with factors {', '.join(plan.factors)} (levels, low and high: "
        + "; ".join(f"{f}: {low} and {high}" for f, (low, high) in levels.items())
        + "), additive model, on the clients' measurements (seed 000 §6, Tables 7-20; a read-write workload's "
        "writes and reads also get a design each, Tables 17-20). The last row of the sign table holds "
        "the effects q; an effect is significant when its confidence interval excludes 0. "
        f"`interval`: {WIDE_MARK} where the interval's half width exceeds {CI_TARGET:.0%} of the effect."
    ]
    items: list = []
    for label, result in analyses.items():
        name = slug(label.replace("(requests/s)", "").replace("(ms)", "")).replace("-", "_")
        unit = "ms" if "(ms)" in label else "rate"
        signs = result.sign_table_frame()
        # Squares of the response's unit: no unit of their own; percentages with two decimals.
        variation_units = {"sum_of_squares": "plain", "variation_percent": "percent"}
        items += [
            Table(f"factorial_{name}_signs", f"Sign table and effects: {label}", signs, index=True,
                  units={c: unit for c in signs.columns if str(c).startswith("y_")}, row_units={"q": unit}),
            Table(
                f"factorial_{name}_variation", f"Allocation of variation: {label}", result.variation_frame(),
                index=True, unit=unit, units=variation_units,
            ),
            Table(
                f"factorial_{name}_effects",
                f"Effects with {summary.level:.0%} confidence intervals: {label}",
                _with_interval_notes(result.effects_frame()),
                index=True,
                unit=unit,
                units=variation_units,
            ),
        ]
    items += present(
        report_figure(
            "factorial_variation",
            "Variation explained",
            plots.factorial_plot({label: r.variation_frame() for label, r in analyses.items()}),
        )
    )
    return Section("2^k r factorial design", text, items)


def _with_interval_notes(effects: pd.DataFrame) -> pd.DataFrame:
    """The effects with a column ``interval`` warning where the half width exceeds the target."""
    half = (effects["ci_high"] - effects["ci_low"]) / 2
    notes = [interval_warning(q, h) for q, h in zip(effects["q"], half)]
    return effects.assign(interval=notes)
