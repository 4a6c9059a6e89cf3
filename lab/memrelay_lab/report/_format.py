"""How every number the report and the CLI print looks, chosen by its unit and magnitude.

The unit comes from the column name or row label the number stands under:

- rates (``throughput``, ``*_rate``, ``(req/s)``, ``λ``, ``μ``): thousands separators,
  no decimals from 100 up (``17,530``), one decimal below;
- times in milliseconds (``*_ms``, ``(ms)``): three fixed decimals, a resolution of 1 µs
  (``0.044``, ``12.500``), thousands separators above 1,000;
- variances of times (``(ms²)``, ``*_ms2``): three decimals from 1, three significant digits
  below (a variance of (20 µs)² is ``0.0004``, which three decimals would print as 0);
- probabilities and fractions (``prob``, ``P(``, ``utilization``, ``ρ``, ``miss_rate``,
  ``error_rate``): four decimals, scientific only below 0.0001 (``3.21e-31``);
- mean numbers of jobs (``queue_length``, ``jobs``): three fixed decimals; percentages
  (``percent``): two;
- relative deviations (unit ``relative``, given by the table): signed percentages
  (``-0.05%``);
- counts (integers): thousands separators;
- anything else: thousands separators from 1,000 up, three decimals from 1, four
  significant digits below (``0.00044``), scientific only below 0.0001.

Never ``1.753e+04``. NaN prints as ``–`` (not defined), infinity as ``∞``.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

__all__ = ["CI_TARGET", "format_interval", "format_number", "interval_warning", "unit_of"]

CI_TARGET = 0.10
"""An interval whose half width exceeds this fraction of its mean gets a warning."""

WIDE_MARK = "⚠"
NO_INTERVAL = "no interval"

_PROBABILITY = re.compile(r"prob|p\(|utilization|ρ|traffic_intensity|miss_rate|error_rate|fraction|share", re.I)
_MS = re.compile(r"_ms\b|_ms_|\(ms\)|^ms$|mean_ms|_ms$", re.I)
_MS2 = re.compile(r"ms²|_ms2", re.I)
_JOBS = re.compile(r"queue.length|jobs", re.I)
_PERCENT = re.compile(r"percent(?!ile)|%", re.I)
_RATE = re.compile(r"throughput|_rate\b|rate$|\(req/s\)|req/s|λ|μ|per_s", re.I)
_TINY = 1e-4


def unit_of(name: object) -> str:
    """``probability``, ``ms``, ``rate``, ``jobs``, ``percent`` or ``plain`` for a column name
    or row label."""
    text = str(name) if name is not None else ""
    if _PERCENT.search(text):
        return "percent"
    if _PROBABILITY.search(text):
        return "probability"
    if _MS2.search(text):
        return "ms2"
    if _MS.search(text):
        return "ms"
    if _RATE.search(text):
        return "rate"
    if _JOBS.search(text):
        return "jobs"
    return "plain"


def format_number(value: Any, name: object = None, unit: str | None = None) -> str:
    """`value` as the report prints it under the column or row `name` (or in `unit`)."""
    if value is None:
        return "–"
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (int, np.integer)):
        return f"{int(value):,}"
    if not isinstance(value, (float, np.floating)):
        return str(value)
    number = float(value)
    if math.isnan(number):
        return "–"
    if math.isinf(number):
        return "∞" if number > 0 else "−∞"
    unit = unit or unit_of(name)
    size = abs(number)
    if unit == "rate":
        return f"{number:,.0f}" if size >= 100 else f"{number:,.1f}"
    if unit == "ms":
        return f"{number:,.3f}"
    if unit == "ms2":
        return f"{number:,.3f}" if size >= 1 or number == 0 else f"{number:.3g}"
    if unit == "relative":  # a fraction shown as a signed percentage: a deviation, an error
        return f"{100 * number:+.2f}%"
    if unit in ("jobs", "percent"):
        return f"{number:,.3f}" if unit == "jobs" else f"{number:.2f}"
    if unit == "probability":
        return f"{number:.4f}" if size >= _TINY or number == 0 else f"{number:.2e}"
    if number.is_integer() and size < 1e15:
        return f"{int(number):,}"
    if size >= 1000:
        return f"{number:,.0f}"
    if size >= 1:
        return f"{number:.3f}"
    return f"{number:.4g}" if size >= _TINY else f"{number:.2e}"


def interval_warning(mean: float, half_width: float, repetitions: int | None = None) -> str:
    """What to print beside an interval: "" when it is narrow enough, else why not."""
    if repetitions is not None and repetitions < 2:
        return NO_INTERVAL
    if half_width is None or not math.isfinite(half_width):
        return NO_INTERVAL
    if mean and math.isfinite(mean) and half_width > CI_TARGET * abs(mean):
        return f"{WIDE_MARK} ±{half_width / abs(mean):.0%}"
    return ""


def format_interval(mean: float, half_width: float, name: object, repetitions: int | None = None) -> str:
    """``mean ± half width`` in the unit of `name`, with the warning of `interval_warning`."""
    text = format_number(mean, name)
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return text
    warning = interval_warning(mean, half_width, repetitions)
    if warning == NO_INTERVAL:
        return f"{text} ({NO_INTERVAL})"
    text = f"{text} ± {format_number(half_width, name)}"
    return f"{text} {warning}" if warning else text
