"""2^k r factorial analyses of a results folder: which design it is, and the analyses.

`factorial_factors(summary)` finds the design (`FactorialPlan`) or says why there is none;
`factorial_results(summary)` runs `theory.factorial_design` on the clients' throughput and
response time of every slice.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._values import configuration_label
from ..results import ResultsSummary
from ..theory import FactorialDesignError, FactorialResult, factorial_design
from ._levels import design_columns, factors_and_slices, ordered_values

__all__ = ["FactorialPlan", "factorial_factors", "factorial_results"]


@dataclass(frozen=True)
class FactorialPlan:
    """How a results folder forms 2^k r designs: the two-level ``factors``, the parameters
    with more values that split it into separate designs (``slice_by``, e.g. the workload
    in seed 000 §6, one 2^3 3 design per workload), and each slice's configurations."""

    factors: list[str]
    slice_by: list[str]
    slices: list[tuple[dict, list[int]]]  # (slice values, configuration numbers)
    replications: int

    def describe(self) -> str:
        design = f"2^{len(self.factors)} {self.replications} design"
        if self.slice_by:
            return f"{design} for each {', '.join(self.slice_by)} ({len(self.slices)} designs)"
        return design


MAX_FACTORIAL_SLICES = 6


def factorial_factors(summary: ResultsSummary) -> tuple[FactorialPlan | None, str]:
    """The 2^k r design(s) of the folder, or None, with the reason.

    Factors are the ordered swept parameters with exactly two values (population parameters
    count as one, ``clients``; `_levels` says which are ordered); at least two are needed.
    Ordered parameters with more values and every categorical parameter, whatever its number
    of values (a read-only and a write-only workload: seeds 003/004 §6 analyse each apart),
    split the folder into slices, each analysed as its own design (at most six). Every slice
    must hold all 2^k level combinations, once each, all with the same number r >= 2 of
    repetitions (seed 000 §6).
    """
    columns = design_columns(summary)
    table = summary.table
    table = table[np.isfinite(table["throughput"].to_numpy(dtype=float))]
    factors, slice_by, _ = factors_and_slices(table, columns, levels=2)
    if len(factors) < 2:
        return None, "fewer than two parameters take exactly two values"
    groups = list(table.groupby(slice_by, sort=True)) if slice_by else [((), table)]
    if len(groups) > MAX_FACTORIAL_SLICES:
        split = ", ".join(slice_by)
        return None, f"{split} split the folder into {len(groups)} designs (more than {MAX_FACTORIAL_SLICES})"
    slices = []
    for key, group in groups:
        keys = key if isinstance(key, tuple) else (key,)
        where = dict(zip(slice_by, keys))
        label = f" for {configuration_label(where)}" if where else ""
        combinations = group.groupby([group[f].astype(str) for f in factors]).size()
        if len(combinations) != 2 ** len(factors) or (combinations != 1).any():
            return None, f"not a 2^k design{label}: some level combinations are missing or confounded"
        slices.append((where, list(group["configuration"])))
    repetitions = table["repetitions"]
    if repetitions.nunique() != 1 or int(repetitions.iloc[0]) < 2:
        return None, "not a 2^k r design: needs the same number r >= 2 of repetitions everywhere"
    plan = FactorialPlan(factors, slice_by, slices, int(repetitions.iloc[0]))
    return plan, plan.describe()


RESPONSES = (("throughput", "throughput (requests/s)"), ("response_ms", "response time (ms)"))
# Seed 000 §6.4 (Tables 17-20): a read-write workload's reads and writes, each its own design.
PER_TYPE_RESPONSES = (("response_set_ms", "write response time (ms)"), ("response_get_ms", "read response time (ms)"))


def factorial_results(summary: ResultsSummary) -> dict[str, FactorialResult]:
    """2^k r analyses of the clients' throughput and response time, keyed by a label
    "<response>" or "<response>, <slice>" (empty when the folder is no such design); in a
    slice with both reads and writes, also of each type's response time (seed 000 §6.4)."""
    plan, _ = factorial_factors(summary)
    if plan is None:
        return {}
    analyses = {}
    for where, configurations in plan.slices:
        runs = summary.runs[summary.runs["configuration"].isin(configurations)]
        suffix = configuration_label(where, empty="")
        mixed = all(c in runs and runs[c].notna().all() for c, _ in PER_TYPE_RESPONSES)
        levels = _low_and_high(runs, plan.factors)
        for response, label in RESPONSES + (PER_TYPE_RESPONSES if mixed else ()):
            data = runs[[*plan.factors, response]].dropna()
            try:
                result = factorial_design(data, plan.factors, response, level=summary.level, levels=levels)
            except FactorialDesignError:
                continue
            analyses[f"{label}, {suffix}" if suffix else label] = result
    return analyses


def _low_and_high(runs, factors: list[str]) -> dict:
    """Each ordered factor's (low, high) values by their order ("1:99" below "10:90", which
    sort the other way as text); categorical factors keep theory's sorted order."""
    levels = {}
    for factor in factors:
        numbers = ordered_values(runs, factor)
        if numbers is not None and len(runs):
            levels[factor] = (runs[factor].loc[numbers.idxmin()], runs[factor].loc[numbers.idxmax()])
    return levels
