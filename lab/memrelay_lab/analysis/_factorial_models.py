"""Additive against multiplicative 2^k r models on the extreme levels (issue 14, item 7; Jain ch. 18).

Factors with more than two levels are reduced to their smallest and largest level
(`extreme_levels`); the 2^k r design is then fitted twice, on y (additive) and on log10 y
(multiplicative). Jain's visual tests (section 18.4) look at the residuals against the
predicted response and at a normal quantile-quantile plot of the residuals;
`compare_models` reduces both to numbers (residual spread relative to the largest effect,
the probability-plot correlation) and names the better-fitting model. `extreme_design` finds
the design in a results folder (seed 002 §4: servers 3 and 7 of 3, 5, 7).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
import numpy as np
import pandas as pd
from scipy import stats

from .._values import configuration_label, plain
from ..results import ResultsSummary
from ..theory import FactorialDesignError, FactorialResult, factorial_design
from ._levels import design_columns, factors_and_slices

__all__ = [
    "ExtremeDesign", "ModelFit", "compare_models", "extreme_design", "extreme_designs", "extreme_levels", "fits_of",
    "model_fit",
]


def extreme_levels(data: pd.DataFrame, factors: Sequence[str]) -> pd.DataFrame:
    """The rows whose every factor is at its smallest or largest level."""
    keep = np.ones(len(data), dtype=bool)
    for factor in factors:
        low, high = data[factor].min(), data[factor].max()
        keep &= data[factor].isin([low, high]).to_numpy()
    return data[keep].reset_index(drop=True)


@dataclass(frozen=True)
class ModelFit:
    """Residual diagnostics of one model: predicted and residual per run, the residual spread
    relative to the largest effect, and the correlation of the normal probability plot."""

    name: str
    result: FactorialResult
    predicted: np.ndarray
    residuals: np.ndarray
    relative_spread: float
    qq_correlation: float


def model_fit(result: FactorialResult, name: str) -> ModelFit:
    """Diagnostics of a fitted 2^k r result (in the scale it was fitted in)."""
    residuals = result.residuals.ravel()
    predicted = np.repeat(result.mean_responses, result.replications)
    largest = max(abs(v) for e, v in result.effects.items() if e != "I")
    (_, _), (_, _, r) = stats.probplot(residuals, dist="norm")
    return ModelFit(
        name=name,
        result=result,
        predicted=predicted,
        residuals=residuals,
        relative_spread=result.error_std / largest if largest else float("inf"),
        qq_correlation=float(r),
    )


def compare_models(data: pd.DataFrame, factors: Sequence[str], response: str) -> tuple[ModelFit, ModelFit, str]:
    """Additive and multiplicative fits on the extreme levels, and the name of the better one
    (the smaller residual spread relative to its largest effect)."""
    extremes = extreme_levels(data, factors)
    additive = model_fit(factorial_design(extremes, factors, response), "additive")
    multiplicative = model_fit(factorial_design(extremes, factors, response, log=True), "multiplicative")
    better = additive if additive.relative_spread <= multiplicative.relative_spread else multiplicative
    return additive, multiplicative, better.name


@dataclass(frozen=True)
class ExtremeDesign:
    """A 2^k r design on the extreme levels: its factors, their two levels, the runs in it,
    and the values of the categorical parameters that sliced it out (``where``, empty when
    none did: one design per workload in seed 000 §6, the full-replication one in 002 §4)."""

    factors: tuple[str, ...]
    levels: dict
    runs: pd.DataFrame
    replications: int
    where: dict = field(default_factory=dict)


def extreme_designs(summary: ResultsSummary) -> tuple[list[ExtremeDesign], str]:
    """The 2^k r designs on the smallest and largest level of the swept parameters (population
    parameters as one, ``clients``), or none with the reason.

    Ordered parameters (numbers, and "SETS:GETS" workloads by their write share) are the
    factors, reduced to their extreme levels. Categorical parameters (named workloads,
    replication, distribution, ...) slice the folder into one design per value, as the seeds
    fix them (000 §6: one design per workload; 002 §4: replication fixed to full); when fewer
    than two ordered factors vary, two-level categorical parameters are factors too (a valid
    2^k factor has two levels, not necessarily an order). Every design needs each corner
    r >= 2 times, the same r everywhere.
    """
    runs = summary.runs[np.isfinite(summary.runs["throughput"].to_numpy(dtype=float))].copy()
    # a swept population can fold into one client count (seed 003 §6: 3x1x2x32 = 3x2x1x32)
    factors, slice_by, ordered = factors_and_slices(runs, design_columns(summary))
    if len(factors) < 2:
        return [], "fewer than two parameters vary over two or more ordered levels"
    # the design works on the ordering numbers (a workload's write share), labelled back below
    keyed = runs.assign(**{c: ordered[c] for c in factors if c in ordered})
    groups = list(keyed.groupby(slice_by, sort=True)) if slice_by else [((), keyed)]
    designs = []
    for key, group in groups:
        where = dict(zip(slice_by, key if isinstance(key, tuple) else (key,)))
        extremes = extreme_levels(group, [c for c in factors if c in ordered])
        cells = extremes.groupby([extremes[f].astype(str) if f not in ordered else extremes[f] for f in factors]).size()
        if len(cells) != 2 ** len(factors) or cells.nunique() != 1 or int(cells.iloc[0]) < 2:
            label = f" for {configuration_label(where)}" if where else ""
            return [], f"the extreme levels{label} do not form a complete 2^k r design with r ≥ 2"
        levels = {}
        for f in factors:
            if f in ordered:
                low, high = extremes[f].min(), extremes[f].max()
                lookup = dict(zip(group[f], runs.loc[group.index, f]))
                levels[f] = (plain(lookup[low]), plain(lookup[high]))
            else:
                low, high = sorted(extremes[f].astype(str).unique())
                levels[f] = (low, high)
        designs.append(ExtremeDesign(tuple(factors), levels, extremes, int(cells.iloc[0]), where))
    if len({d.replications for d in designs}) != 1:
        return [], "the designs have different numbers of repetitions"
    return designs, ""


def extreme_design(summary: ResultsSummary) -> tuple[ExtremeDesign | None, str]:
    """The first of `extreme_designs` (the only one when no categorical parameter slices)."""
    designs, reason = extreme_designs(summary)
    return (designs[0], "") if designs else (None, reason)


def fits_of(design: ExtremeDesign, response: str) -> tuple[ModelFit, ModelFit, str] | None:
    """Additive and multiplicative fits of `response` on the design; None if it cannot be fitted."""
    data = design.runs[[*design.factors, response]].dropna()
    if (data[response] <= 0).any():
        return None
    try:
        return compare_models(data, design.factors, response)
    except FactorialDesignError:
        return None
