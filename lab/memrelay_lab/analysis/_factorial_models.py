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
from dataclasses import dataclass
import numpy as np
import pandas as pd
from scipy import stats

from ..results import ResultsSummary
from ..theory import FactorialDesignError, FactorialResult, factorial_design
from ._factorial_tables import design_columns

__all__ = ["ExtremeDesign", "ModelFit", "compare_models", "extreme_design", "extreme_levels", "fits_of", "model_fit"]


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
    """A 2^k r design on the extreme levels: its factors, their two levels, the runs in it."""

    factors: tuple[str, ...]
    levels: dict
    runs: pd.DataFrame
    replications: int


def extreme_design(summary: ResultsSummary) -> tuple[ExtremeDesign | None, str]:
    """The 2^k r design on the smallest and largest level of every swept parameter (population
    parameters as one, ``clients``), or None with the reason: fewer than two swept parameters,
    a level combination missing, or fewer than two repetitions of one."""
    factors = [c for c in design_columns(summary) if c in summary.runs]
    numeric = [f for f in factors if pd.api.types.is_numeric_dtype(summary.runs[f])
               and not pd.api.types.is_bool_dtype(summary.runs[f])]
    if len(numeric) < 2:
        return None, "fewer than two numeric parameters vary"
    runs = summary.runs[np.isfinite(summary.runs["throughput"].to_numpy(dtype=float))]
    extremes = extreme_levels(runs, numeric)
    cells = extremes.groupby(numeric).size()
    if len(cells) != 2 ** len(numeric) or cells.nunique() != 1 or int(cells.iloc[0]) < 2:
        return None, "the extreme levels do not form a complete 2^k r design with r ≥ 2"
    levels = {f: (extremes[f].min(), extremes[f].max()) for f in numeric}
    return ExtremeDesign(tuple(numeric), levels, extremes, int(cells.iloc[0])), ""


def fits_of(design: ExtremeDesign, response: str) -> tuple[ModelFit, ModelFit, str] | None:
    """Additive and multiplicative fits of `response` on the design; None if it cannot be fitted."""
    data = design.runs[[*design.factors, response]].dropna()
    if (data[response] <= 0).any():
        return None
    try:
        return compare_models(data, design.factors, response)
    except FactorialDesignError:
        return None
