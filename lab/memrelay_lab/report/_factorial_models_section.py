"""The report's "2^k r on the extreme levels" section (`analysis.extreme_design`, seed 002 §4,
seed 004, Jain ch. 18): additive and multiplicative models side by side with the visual tests
(residuals against predicted, normal quantile-quantile plot of the residuals)."""

from __future__ import annotations

import pandas as pd
from matplotlib.ticker import MaxNLocator
from scipy import stats

from .._values import configuration_label
from ..analysis import FACTORIAL_RESPONSES, extreme_designs, fits_of
from ..results import ResultsSummary
from . import _plots
from ._document import Figure, Section, Table
from ._render import slug


def factorial_models_section(summary: ResultsSummary) -> Section | None:
    designs, _ = extreme_designs(summary)
    if not designs:
        return None
    first = designs[0]
    levels = "; ".join(f"{f}: {low} and {high}" for f, (low, high) in first.levels.items())
    sliced = ", ".join(first.where)
    text = [
        f"A 2^{len(first.factors)} {first.replications} design on the smallest and largest level of every ordered "
        f"swept parameter ({levels}), the way seed 002 §4 reduces its experiment to two levels per factor (its sign "
        "table in §4.2, its allocation of variation in §4.4)"
        + (f", one design per {sliced} (categorical parameters are fixed, whatever their number of values, as "
           "seeds 000 and 003/004 §6 analyse each workload apart)" if sliced else "")
        + ", fitted twice: on y (additive model, effects add up) and on log10 y "
        "(multiplicative model, effects multiply: the natural one when a factor scales the response). The "
        "multiplicative model's effects are shown as factors: its mean is the geometric mean 10^q0 and an effect "
        "q multiplies the response by 10^q at the factor's high level and divides it by 10^q at the low one. "
        "Jain §18.4's "
        "tests: the residuals should show no trend against the predicted response and lie on a line in the normal "
        "quantile-quantile plot. Relative spread = the errors' standard deviation over the largest effect (smaller "
        "is better); QQ correlation = the probability plot's correlation coefficient (closer to 1 is better). The "
        "better model is the one whose errors are smaller against its effects."
    ]
    items: list[Table | Figure] = []
    for design in designs:
        where = configuration_label(design.where, empty="")
        for response, label in FACTORIAL_RESPONSES:
            fits = fits_of(design, response)
            if fits is None:
                continue
            additive, multiplicative, better = fits
            columns = {}
            for fit in (additive, multiplicative):
                # the multiplicative model's effects as factors on the response (10^q)
                scale = (lambda q: q) if fit.name == "additive" else (lambda q: 10.0 ** q)
                column = {"mean (q0)": scale(fit.result.effects["I"])}
                column.update({f"{effect}: effect (additive: + q; multiplicative: × 10^q)": scale(value)
                               for effect, value in fit.result.effects.items() if effect != "I"})
                column.update({f"{effect}: % of variation": value
                               for effect, value in fit.result.variation_percent.items() if effect != "I"})
                column["errors: % of variation"] = fit.result.error_percent
                column["relative spread"] = fit.relative_spread
                column["QQ correlation"] = fit.qq_correlation
                columns[fit.name + (" (better)" if fit.name == better else "")] = column
            frame = pd.DataFrame(columns)
            frame.index.name = "measure"
            title = f"{label}, {where}" if where else label
            name = slug(f"{response} {where}" if where else response).replace("-", "_")
            items.append(Table(f"extreme_models_{name}", f"Additive and multiplicative models: {title}", frame,
                               index=True,
                               row_units={**{r: "percent" for r in frame.index if "% of" in r},
                                          "relative spread": "probability", "QQ correlation": "probability"}))
            items.append(_diagnostics(f"extreme_residuals_{name}", title, (additive, multiplicative)))
    if not items:
        return None
    return Section("2^k r on the extreme levels: additive or multiplicative", text, items)


def _diagnostics(name: str, label: str, fits) -> Figure:
    plt = _plots.plt
    figure, axes = plt.subplots(2, 2, figsize=(9, 6.4), layout="constrained")
    for row, fit in zip(axes, fits):
        scale = " (log10)" if fit.name == "multiplicative" else ""
        row[0].scatter(fit.predicted, fit.residuals, s=14)
        row[0].axhline(0.0, color="grey", linewidth=0.8)
        row[0].set(xlabel=f"predicted{scale}", ylabel=f"residual{scale}", title=f"{fit.name}: residuals vs predicted")
        row[0].xaxis.set_major_locator(MaxNLocator(5))  # large throughputs: fewer ticks, no overlap
        stats.probplot(fit.residuals, dist="norm", plot=row[1])
        row[1].set(title=f"{fit.name}: normal Q-Q of residuals", xlabel="normal quantile", ylabel=f"residual{scale}")
        for ax in row:
            ax.grid(True, alpha=0.3)
    figure.suptitle(f"Visual tests (Jain §18.4): {label}")
    return Figure(name, f"Residuals of the additive and multiplicative models: {label}", _plots.png_bytes(figure))
