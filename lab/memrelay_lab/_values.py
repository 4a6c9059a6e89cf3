"""Plain Python values: for JSON, for labels.

`jsonable` turns analysis results into values `json.dumps` accepts. Results hold numpy scalars and arrays and use NaN for "not defined" (a confidence interval
of one repetition, the utilization of a delay center). JSON has no NaN, so it becomes null.

`plain` turns one numpy scalar into its Python value (a whole float into an int), and
`configuration_label` is the one way a configuration is named in text: ``name=value``
pairs joined by commas (``workers=2, clients=4``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["configuration_label", "jsonable", "plain"]


def jsonable(value: Any) -> Any:
    """Recursively convert numpy types to Python ones and NaN/infinity to None."""
    if isinstance(value, Mapping):
        return {str(key): jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(item) for item in value]
    if isinstance(value, np.ndarray):
        return [jsonable(item) for item in value.tolist()]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        number = float(value)
        return number if math.isfinite(number) else None
    return value


def plain(value: Any) -> Any:
    """A numpy scalar as its Python value; a whole float as an int (4.0 -> 4)."""
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return int(value)
    if isinstance(value, np.generic):
        return value.item()
    return value


def configuration_label(values: Mapping[str, Any], columns: Any = None, *, empty: str = "all runs") -> str:
    """``name=value`` pairs of `columns` (default: every key of `values`), e.g. ``workers=2, clients=4``."""
    names = list(values.keys()) if columns is None else list(columns)
    return ", ".join(f"{name}={plain(values[name])}" for name in names) or empty
