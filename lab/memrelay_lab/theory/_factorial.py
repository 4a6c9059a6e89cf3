"""2^k r factorial designs (Jain chapters 17-18), for any number of factors k.

Every factor has two levels, coded -1 and +1. Each of the 2^k level combinations is run
r times. The model is

    y_ij = q_0 + sum over effects e of q_e * x_e(i) + e_ij

where the effects are the factors and all their interactions (AB, AC, ..., ABC...).
With the sign table S (one row per combination, one column per effect, column I all +1):

    q_e  = (1 / 2^k) sum_i S_ie ybar_i            (ybar_i: mean of the r repetitions)
    SSY  = sum y_ij^2,  SS0 = 2^k r q_0^2,  SST = SSY - SS0
    SS_e = 2^k r q_e^2, SSE = sum (y_ij - ybar_i)^2, SST = sum_e SS_e + SSE
    s_e  = sqrt(SSE / (2^k (r - 1))),  s_q = s_e / sqrt(2^k r)
    CI(q_e) = q_e -/+ t_{(1+level)/2; 2^k (r-1)} s_q, significant if it excludes 0.

The multiplicative model (`log=True`) does the same on log10(y); 10^q_e is then the factor
by which effect e multiplies the response. Seed 000 section 6 (Tables 7-20) and seed 002
section 4 are 2^3 3 and 2^2 3 designs computed this way.

Rows of the sign table come in standard order (the first factor alternates fastest), as in
seed 000 Table 7. Effect names join factor names: "AB" when every factor name is a single
character, "servers:workers" otherwise.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import special

from .._values import jsonable

__all__ = [
    "FactorialDesignError",
    "FactorialResult",
    "factorial_design",
    "factorial_from_responses",
    "read_factorial_csv",
]

MEAN_EFFECT = "I"


class FactorialDesignError(ValueError):
    """The data do not form a 2^k r design (missing combination, unequal r, bad levels...)."""


@dataclass(frozen=True)
class FactorialResult:
    """Everything a 2^k r analysis produces. Mappings are keyed by effect name.

    `effects`, `sum_of_squares`, `variation_percent`, `confidence_intervals` and
    `significant` cover the mean effect "I" too (its SS is SS0, its variation percent NaN).
    `levels[factor] = (low, high)` says which original value was coded -1 and +1.
    """

    factors: tuple[str, ...]
    levels: Mapping[str, tuple[object, object]]
    replications: int
    log_transformed: bool
    level: float
    effect_names: tuple[str, ...]
    sign_table: np.ndarray
    responses: np.ndarray
    effects: Mapping[str, float]
    ssy: float
    ss0: float
    sst: float
    sse: float
    sum_of_squares: Mapping[str, float]
    variation_percent: Mapping[str, float]
    error_percent: float
    degrees_of_freedom: int
    error_std: float
    effect_std: float
    t_quantile: float
    confidence_intervals: Mapping[str, tuple[float, float]]
    significant: Mapping[str, bool]

    @property
    def k(self) -> int:
        return len(self.factors)

    @property
    def mean_responses(self) -> np.ndarray:
        return self.responses.mean(axis=1)

    @property
    def residuals(self) -> np.ndarray:
        """e_ij = y_ij - ybar_i, one row per combination (the model's estimate is ybar_i)."""
        return self.responses - self.mean_responses[:, None]

    @property
    def multiplicative_effects(self) -> dict[str, float]:
        """10^q for the multiplicative model; NaN entries for the additive model."""
        return {name: 10.0**q if self.log_transformed else math.nan for name, q in self.effects.items()}

    def sign_table_frame(self) -> pd.DataFrame:
        """Shaped like seed 000 Table 7: sign columns, y_1..y_r, ybar, and a last row q_x."""
        table = pd.DataFrame(self.sign_table, columns=list(self.effect_names))
        for j in range(self.replications):
            table[f"y_{j + 1}"] = self.responses[:, j]
        table["y_mean"] = self.mean_responses
        effect_row = pd.DataFrame([{name: self.effects[name] for name in self.effect_names}], index=["q"])
        table.index = [str(i + 1) for i in range(len(table))]
        return pd.concat([table.astype(float), effect_row])

    def variation_frame(self) -> pd.DataFrame:
        """Shaped like seed 000 Table 8: sum of squares and percentage of variation."""
        rows = [("SSY", self.ssy, math.nan), ("SS0", self.ss0, math.nan), ("SST", self.sst, 100.0)]
        rows += [(name, self.sum_of_squares[name], self.variation_percent[name]) for name in self.effect_names[1:]]
        rows.append(("Errors", self.sse, self.error_percent))
        return pd.DataFrame(rows, columns=["component", "sum_of_squares", "variation_percent"]).set_index("component")

    def effects_frame(self) -> pd.DataFrame:
        """One row per effect: q, CI, significance, SS, variation percent (and 10^q if log)."""
        frame = pd.DataFrame(
            {
                "effect": list(self.effect_names),
                "q": [self.effects[e] for e in self.effect_names],
                "ci_low": [self.confidence_intervals[e][0] for e in self.effect_names],
                "ci_high": [self.confidence_intervals[e][1] for e in self.effect_names],
                "significant": [self.significant[e] for e in self.effect_names],
                "sum_of_squares": [self.sum_of_squares[e] for e in self.effect_names],
                "variation_percent": [self.variation_percent[e] for e in self.effect_names],
            }
        )
        if self.log_transformed:
            frame["multiplicative_effect"] = [self.multiplicative_effects[e] for e in self.effect_names]
        return frame.set_index("effect")

    def to_dict(self) -> dict:
        return jsonable(
            {
                "factors": list(self.factors),
                "levels": {f: {"low": low, "high": high} for f, (low, high) in self.levels.items()},
                "replications": self.replications,
                "model": "multiplicative" if self.log_transformed else "additive",
                "confidence_level": self.level,
                "effects": {
                    name: {
                        "q": self.effects[name],
                        "ci_low": self.confidence_intervals[name][0],
                        "ci_high": self.confidence_intervals[name][1],
                        "significant": self.significant[name],
                        "sum_of_squares": self.sum_of_squares[name],
                        "variation_percent": self.variation_percent[name],
                        **({"multiplicative_effect": 10.0 ** self.effects[name]} if self.log_transformed else {}),
                    }
                    for name in self.effect_names
                },
                "ssy": self.ssy,
                "ss0": self.ss0,
                "sst": self.sst,
                "sse": self.sse,
                "error_percent": self.error_percent,
                "degrees_of_freedom": self.degrees_of_freedom,
                "error_std": self.error_std,
                "effect_std": self.effect_std,
                "t_quantile": self.t_quantile,
                "sign_table": self.sign_table,
                "responses": self.responses,
            }
        )


def factorial_from_responses(
    responses: Sequence[Sequence[float]] | np.ndarray,
    factors: Sequence[str] | None = None,
    *,
    log: bool = False,
    level: float = 0.95,
    levels: Mapping[str, tuple[object, object]] | None = None,
) -> FactorialResult:
    """2^k r analysis of a (2^k, r) array of responses whose rows are in standard order.

    Row i has factor f (0-based) at +1 when bit f of i is set: for k = 3 the rows are
    (-,-,-), (+,-,-), (-,+,-), (+,+,-), ... exactly as in seed 000 Table 7. Factors default
    to A, B, C, ...
    """
    y = np.asarray(responses, dtype=float)
    if y.ndim != 2 or y.shape[0] < 2 or y.shape[1] < 1:
        raise FactorialDesignError(f"responses must be a 2^k x r table, got shape {y.shape}")
    k = int(round(math.log2(y.shape[0])))
    if 2**k != y.shape[0]:
        raise FactorialDesignError(f"{y.shape[0]} rows is not a power of two")
    if factors is None:
        factors = [chr(ord("A") + f) for f in range(k)] if k <= 26 else [f"x{f + 1}" for f in range(k)]
    factors = tuple(str(f) for f in factors)
    if len(factors) != k:
        raise FactorialDesignError(f"{len(factors)} factor names for 2^{k} rows")
    if len(set(factors)) != k:
        raise FactorialDesignError(f"factor names must be distinct, got {list(factors)}")
    if not np.all(np.isfinite(y)):
        raise FactorialDesignError("responses must be finite numbers")
    if not 0.0 < level < 1.0:
        raise ValueError(f"confidence level must be between 0 and 1 (exclusive), got {level}")
    if log:
        if np.any(y <= 0):
            raise FactorialDesignError("the multiplicative model (log) needs positive responses")
        y = np.log10(y)

    effect_columns = _effect_columns(k)
    names = tuple(_effect_name(columns, factors) for columns in effect_columns)
    signs = _sign_table(k, effect_columns)
    runs, r = y.shape

    means = y.mean(axis=1)
    q = signs.T @ means / runs
    ssy = float(np.sum(y**2))
    ss_effects = runs * r * q**2
    ss0 = float(ss_effects[0])
    sse = float(np.sum((y - means[:, None]) ** 2))
    sst = ssy - ss0
    dof = runs * (r - 1)
    if dof > 0:
        error_std = math.sqrt(sse / dof)
        effect_std = error_std / math.sqrt(runs * r)
        t_quantile = float(special.stdtrit(dof, (1.0 + level) / 2.0))
    else:
        # r = 1: no repetitions, no estimate of the experimental error.
        error_std = effect_std = t_quantile = math.nan
    half_width = t_quantile * effect_std
    intervals = {name: (float(q[e] - half_width), float(q[e] + half_width)) for e, name in enumerate(names)}

    def percent(ss: float) -> float:
        return 100.0 * ss / sst if sst > 0 else math.nan

    return FactorialResult(
        factors=factors,
        levels=dict(levels) if levels is not None else {f: (-1, 1) for f in factors},
        replications=r,
        log_transformed=log,
        level=level,
        effect_names=names,
        sign_table=signs,
        responses=y,
        effects={name: float(q[e]) for e, name in enumerate(names)},
        ssy=ssy,
        ss0=ss0,
        sst=sst,
        sse=sse,
        sum_of_squares={name: float(ss_effects[e]) for e, name in enumerate(names)},
        variation_percent={name: (math.nan if e == 0 else percent(ss_effects[e])) for e, name in enumerate(names)},
        error_percent=percent(sse),
        degrees_of_freedom=dof,
        error_std=error_std,
        effect_std=effect_std,
        t_quantile=t_quantile,
        confidence_intervals=intervals,
        significant={name: bool(low > 0 or high < 0) for name, (low, high) in intervals.items()},
    )


def factorial_design(
    data: pd.DataFrame,
    factors: Sequence[str],
    response: str,
    *,
    log: bool = False,
    level: float = 0.95,
    levels: Mapping[str, Sequence[object]] | None = None,
) -> FactorialResult:
    """2^k r analysis of a table with one row per run: factor columns plus a response column.

    Repetitions are repeated rows; every one of the 2^k level combinations must appear the
    same number of times r. A factor's two levels are taken as given when they are -1 and
    +1; otherwise `levels[factor] = (low, high)` says which value is -1, and without it the
    smaller value (numbers) or the first in sorted order (text) is -1.
    """
    factors = list(factors)
    if not factors:
        raise FactorialDesignError("at least one factor is needed")
    missing = [c for c in [*factors, response] if c not in data.columns]
    if missing:
        raise FactorialDesignError(
            f"missing column(s) {', '.join(map(repr, missing))}; the table has {', '.join(map(repr, data.columns))}"
        )
    if len(set(factors)) != len(factors) or response in factors:
        raise FactorialDesignError("factors must be distinct columns, other than the response")
    values = pd.to_numeric(data[response], errors="coerce")
    if values.isna().any():
        bad = data.loc[values.isna(), response].iloc[0]
        raise FactorialDesignError(f"response column {response!r} has a non-numeric or empty value: {bad!r}")

    coded = {}
    chosen_levels = {}
    for factor in factors:
        low, high = _factor_levels(data[factor], factor, None if levels is None else levels.get(factor))
        chosen_levels[factor] = (low, high)
        coded[factor] = np.where(data[factor].to_numpy() == high, 1, -1)

    # Standard order: row index = sum over factors f of 2^f when factor f is high.
    row_of_run = sum((coded[f] > 0).astype(int) << bit for bit, f in enumerate(factors))
    runs = 2 ** len(factors)
    groups = [values.to_numpy()[row_of_run == row] for row in range(runs)]
    counts = [len(g) for g in groups]
    if min(counts) == 0 or len(set(counts)) != 1:
        described = ", ".join(
            f"{_describe_row(row, factors, chosen_levels)}: {count}" for row, count in enumerate(counts)
        )
        raise FactorialDesignError(f"every level combination needs the same number of runs; got {described}")
    return factorial_from_responses(np.vstack(groups), factors, log=log, level=level, levels=chosen_levels)


def read_factorial_csv(
    path: str | Path,
    factors: Sequence[str],
    response: str,
    *,
    log: bool = False,
    level: float = 0.95,
    levels: Mapping[str, Sequence[object]] | None = None,
) -> FactorialResult:
    """`factorial_design` on a CSV file with a header row (one row per run)."""
    try:
        data = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as error:
        raise FactorialDesignError(f"cannot read {path} as CSV: {error}".splitlines()[0]) from None
    return factorial_design(data, factors, response, log=log, level=level, levels=levels)


def _effect_columns(k: int) -> list[tuple[int, ...]]:
    """(), (0,), (1,), ..., (0, 1), (0, 2), ...: I, main effects, then interactions by order."""
    return [combo for order in range(k + 1) for combo in itertools.combinations(range(k), order)]


def _effect_name(columns: tuple[int, ...], factors: Sequence[str]) -> str:
    if not columns:
        return MEAN_EFFECT
    separator = "" if all(len(f) == 1 for f in factors) else ":"
    return separator.join(factors[c] for c in columns)


def _sign_table(k: int, effect_columns: list[tuple[int, ...]]) -> np.ndarray:
    rows = np.arange(2**k)
    x = np.array([np.where((rows >> f) & 1, 1, -1) for f in range(k)]).T  # (2^k, k)
    table = np.ones((2**k, len(effect_columns)), dtype=int)
    for e, columns in enumerate(effect_columns):
        for c in columns:
            table[:, e] *= x[:, c]
    return table


def _factor_levels(column: pd.Series, factor: str, given: Sequence[object] | None) -> tuple[object, object]:
    present = list(pd.unique(column))
    if given is not None:
        if len(given) != 2:
            raise FactorialDesignError(f"levels of {factor!r} must be (low, high), got {given!r}")
        low, high = given
        # CSV columns hold numbers or strings; compare as text so 2 and "2" are the same level.
        by_text = {str(v): v for v in present}
        unknown = [v for v in present if str(v) not in (str(low), str(high))]
        if unknown or len(present) != 2:
            raise FactorialDesignError(f"factor {factor!r} has values {present}, expected exactly {low!r} and {high!r}")
        return by_text[str(low)], by_text[str(high)]
    if len(present) != 2:
        raise FactorialDesignError(f"factor {factor!r} must have exactly two levels, got {len(present)}: {present}")
    if set(present) == {-1, 1}:
        return -1, 1
    try:
        low, high = sorted(present)
    except TypeError:
        low, high = sorted(present, key=str)
    return low, high


def _describe_row(row: int, factors: Sequence[str], levels: Mapping[str, tuple[object, object]]) -> str:
    parts = [f"{f}={levels[f][(row >> bit) & 1]}" for bit, f in enumerate(factors)]
    return "(" + ", ".join(parts) + ")"
