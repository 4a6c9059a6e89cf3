"""The interactive response-time law as a sanity check of measurements.

In a closed system of N clients that each think for Z between a reply and the next
request, R = N / X - Z and, equivalently, X = N / (R + Z) (Jain chapter 33; seed 002
section 5, seed 004 section 1.2). Comparing measured R and X with what the law predicts
from the other one catches broken measurements: a flagged configuration means the
throughput and the response time do not describe the same runs (or Z is wrong).

Think time: given, solved from the law (`think_time_from_law`, seed 002 Table 5), or,
when R is measured on the middleware, estimated as the client-side response time minus
the middleware-side one (`estimate_think_time`, seeds 000 and 004): from the middleware's
point of view the network round trip and the client's own time are think time.

Units: X in requests per second; R and Z in `time_unit` ("s", "ms" or "us").
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from .._values import jsonable

__all__ = [
    "InteractiveLawCheck",
    "estimate_think_time",
    "interactive_law",
    "interactive_law_frame",
    "think_time_from_law",
]

SECONDS_PER_UNIT = {"s": 1.0, "ms": 1e-3, "us": 1e-6}
DEFAULT_TOLERANCE = 0.10


@dataclass(frozen=True)
class InteractiveLawCheck:
    """Measured and predicted R and X; deviations are (predicted - measured) / measured."""

    clients: float
    throughput: float
    response_time: float
    think_time: float
    predicted_response_time: float
    predicted_throughput: float
    response_time_deviation: float
    throughput_deviation: float
    tolerance: float
    consistent: bool

    def to_dict(self) -> dict:
        return jsonable(asdict(self))


def interactive_law(
    clients: float,
    throughput: float,
    response_time: float,
    think_time: float = 0.0,
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    time_unit: str = "s",
) -> InteractiveLawCheck:
    """Predict R = N/X - Z and X = N/(R + Z) and flag deviations beyond `tolerance`.

    `consistent` is False when either relative deviation exceeds the tolerance.
    """
    scale = _seconds_per_unit(time_unit)
    n = _non_negative("clients", clients)
    x = _positive("throughput", throughput)
    r = _positive("response_time", response_time)
    z = _non_negative("think_time", think_time)
    if not tolerance >= 0:
        raise ValueError(f"tolerance must be >= 0, got {tolerance}")
    predicted_r = n / x / scale - z
    predicted_x = n / ((r + z) * scale)
    r_deviation = (predicted_r - r) / r
    x_deviation = (predicted_x - x) / x
    return InteractiveLawCheck(
        clients=n,
        throughput=x,
        response_time=r,
        think_time=z,
        predicted_response_time=predicted_r,
        predicted_throughput=predicted_x,
        response_time_deviation=r_deviation,
        throughput_deviation=x_deviation,
        tolerance=tolerance,
        consistent=bool(abs(r_deviation) <= tolerance and abs(x_deviation) <= tolerance),
    )


def think_time_from_law(clients: float, throughput: float, response_time: float, *, time_unit: str = "s") -> float:
    """Z = N / X - R: the think time that makes the law hold exactly (seed 002 Table 5)."""
    scale = _seconds_per_unit(time_unit)
    return _non_negative("clients", clients) / _positive("throughput", throughput) / scale - float(response_time)


def estimate_think_time(client_response_time: float, middleware_response_time: float) -> float:
    """Think time seen by the middleware: client-side minus middleware-side response time.

    Both in the same unit. The difference is the network round trip plus the client's own
    processing, which the middleware cannot tell apart from think time.
    """
    return float(client_response_time) - float(middleware_response_time)


def interactive_law_frame(
    frame: pd.DataFrame,
    *,
    clients: str = "clients",
    throughput: str = "throughput",
    response_time: str = "response_time",
    think_time: float | str = 0.0,
    client_response_time: str | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
    time_unit: str = "s",
) -> pd.DataFrame:
    """The law applied to every row of `frame` (one configuration per row).

    Think time is `think_time` (a number, or the name of a column), or, when
    `client_response_time` names a column, that column minus the `response_time` column.
    Returns a copy of `frame` with columns think_time, predicted_response_time,
    predicted_throughput, response_time_deviation, throughput_deviation, consistent.
    """
    scale = _seconds_per_unit(time_unit)
    needed = [clients, throughput, response_time]
    if client_response_time is not None:
        needed.append(client_response_time)
    if isinstance(think_time, str):
        needed.append(think_time)
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        raise ValueError(f"missing columns: {', '.join(missing)}")

    n = frame[clients].to_numpy(dtype=float)
    x = frame[throughput].to_numpy(dtype=float)
    r = frame[response_time].to_numpy(dtype=float)
    if client_response_time is not None:
        z = frame[client_response_time].to_numpy(dtype=float) - r
    elif isinstance(think_time, str):
        z = frame[think_time].to_numpy(dtype=float)
    else:
        z = np.full(len(frame), float(think_time))
    if np.any(x <= 0) or np.any(r <= 0):
        raise ValueError("throughput and response time must be positive")

    result = frame.copy()
    result["think_time"] = z
    result["predicted_response_time"] = n / x / scale - z
    result["predicted_throughput"] = n / ((r + z) * scale)
    result["response_time_deviation"] = (result["predicted_response_time"] - r) / r
    result["throughput_deviation"] = (result["predicted_throughput"] - x) / x
    result["consistent"] = (result["response_time_deviation"].abs() <= tolerance) & (
        result["throughput_deviation"].abs() <= tolerance
    )
    return result


def _seconds_per_unit(time_unit: str) -> float:
    try:
        return SECONDS_PER_UNIT[time_unit]
    except KeyError:
        raise ValueError(f"time_unit must be one of {', '.join(SECONDS_PER_UNIT)}, got {time_unit!r}") from None


def _positive(name: str, value: float) -> float:
    number = float(value)
    if not math.isfinite(number) or number <= 0:
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return number


def _non_negative(name: str, value: float) -> float:
    number = float(value)
    if not math.isfinite(number) or number < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return number
