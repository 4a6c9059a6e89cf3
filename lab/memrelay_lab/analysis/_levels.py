"""Which swept parameters of a design are ordered (factors of a 2^k r design) and which are
categorical (one design per value), for every factorial analysis of the lab.

Ordered: numbers, and "SETS:GETS" workloads by their write share (seed 001 §3's 1 %, 5 %,
10 % writes; seed 002 §4 takes 1 % and 10 % as a factor's two levels). Categorical: named
workloads (write-only, read-only, 50-50: different request types, different systems; seeds
000 and 003/004 §6 analyse each workload apart), replication, distribution, booleans, any
other text. The seeds fix a categorical parameter and run one design per value, whatever
its number of values; only when fewer than two ordered parameters vary does a two-valued
categorical one become a factor (a 2^k factor needs two levels, not an order).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from ..experiment import WORKLOADS, workload_ratio
from ..results import POPULATION, ResultsSummary

__all__ = ["design_columns", "factors_and_slices", "ordered_values", "write_share"]


def write_share(workload: str) -> float | None:
    """The share of sets of a "SETS:GETS" workload, None for a named one (write-only, read-only,
    50-50): a ratio is a quantity with a low and a high level (seed 001 §3's 1 % and 10 %
    writes), the named workloads are separate experiments (seed 000 §6 analyses each apart)."""
    if workload in WORKLOADS:
        return None
    sets, gets = workload_ratio(workload)
    return sets / (sets + gets)


def ordered_values(frame: pd.DataFrame, column: str) -> pd.Series | None:
    """The column as numbers that order its levels, or None when it is categorical."""
    values = frame[column]
    if pd.api.types.is_bool_dtype(values):
        return None
    if pd.api.types.is_numeric_dtype(values):
        return values.astype(float)
    if column == "workload":
        shares = values.astype(str).map(write_share)
        return None if shares.isna().any() else shares.astype(float)
    return None


def design_columns(summary: ResultsSummary) -> list[str]:
    """The swept parameters as a design's candidate factors, the population ones as one: clients."""
    columns: list[str] = []
    for parameter in summary.swept:
        column = "clients" if parameter in POPULATION else parameter
        if column not in columns:
            columns.append(column)
    return columns


def factors_and_slices(frame: pd.DataFrame, columns: Sequence[str], *, levels: int | None = None
                       ) -> tuple[list[str], list[str], dict[str, pd.Series]]:
    """(factors, slice_by, ordered): the ordered columns are the factors (with ``levels=2``
    only those with exactly two values; the others then slice), every categorical column
    slices, except that two-valued categorical columns are factors when fewer than two
    ordered ones are (module docstring). ``ordered`` maps each ordered column to its numbers."""
    varying = [c for c in columns if c in frame and frame[c].astype(str).nunique() > 1]
    ordered = {}
    for column in varying:
        numbers = ordered_values(frame, column)
        if numbers is not None:
            ordered[column] = numbers
    count = {c: frame[c].astype(str).nunique() for c in varying}
    factors = [c for c in ordered if levels is None or count[c] == levels]
    categorical = [c for c in varying if c not in ordered]
    if len(factors) < 2:
        factors += [c for c in categorical if count[c] == 2]
    slice_by = [c for c in varying if c not in factors]
    return factors, slice_by, ordered
