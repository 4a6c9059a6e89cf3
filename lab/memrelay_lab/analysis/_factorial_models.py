"""Additive against multiplicative 2^k r models on the extreme levels (issue 14, item 7; Jain ch. 18).

Factors with more than two levels are reduced to their smallest and largest level
(`extreme_levels`); the 2^k r design is then fitted twice, on y (additive) and on log10 y
(multiplicative). Jain's visual tests (section 18.4) look at the residuals against the
predicted response and at a normal quantile-quantile plot of the residuals;
`compare_models` reduces both to numbers (residual spread relative to the largest effect,
the probability-plot correlation) and names the better-fitting model; `plot_diagnostics`
draws the four panels.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from ..theory import FactorialResult, factorial_design

__all__ = ["ModelFit", "compare_models", "extreme_levels", "model_fit", "plot_diagnostics"]


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


def plot_diagnostics(fits: Sequence[ModelFit], path: Path) -> Path:
    """Residuals against predicted and a normal Q-Q plot of residuals, one row per model."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(fits), 2, figsize=(9, 3.5 * len(fits)), squeeze=False)
    for row, fit in zip(axes, fits):
        row[0].scatter(fit.predicted, fit.residuals, s=12)
        row[0].axhline(0.0, color="grey", linewidth=0.8)
        row[0].set(xlabel="predicted response", ylabel="residual", title=f"{fit.name}: residuals vs predicted")
        stats.probplot(fit.residuals, dist="norm", plot=row[1])
        row[1].set_title(f"{fit.name}: normal Q-Q of residuals")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
