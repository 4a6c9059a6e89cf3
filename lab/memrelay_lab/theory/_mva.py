"""Exact single-class Mean Value Analysis of a closed network of queues with think time.

The middleware is a closed system: N clients each send a request, wait for the reply,
think for Z, and send the next one (seed 000 section 7.4, seed 002 section 3). Its
centers are of four kinds:

- ``queue``: fixed-rate, one server (the net thread): R_i(n) = D_i (1 + Q_i(n-1)).
- ``delay``: infinite servers, no waiting (the network, memcached as seed 000 models it):
  R_i(n) = D_i.
- ``multi``: m identical servers (the worker pool), a load-dependent center whose service
  rate with j jobs present is min(j, m) / S.
- ``load_dependent``: any service rate alpha(j) / S with j jobs present, given as a rate
  multiplier function alpha (Jain Box 36.1).

Demands are D_i = V_i S_i (visits times service time per visit). For load-dependent
centers Box 36.1 tracks the marginal probabilities P_i(j | n) of j jobs at the center:

    R_i(n)   = sum_{j=1..n} j D_i / alpha_i(j) P_i(j-1 | n-1)
    X(n)     = n / (Z + sum_i R_i(n))
    P_i(j|n) = X(n) D_i / alpha_i(j) P_i(j-1 | n-1),  j = 1..n
    P_i(0|n) = 1 - sum_{j>=1} P_i(j | n)   (Box 36.1; computed here without the
               subtraction, which is unstable for busy multi-server centers: see `_solve`)

`mva()` returns the results for every population 1..N. `bottleneck()` names the center
with the largest demand per server and `asymptotic_bounds()` gives the asymptotic bounds
of Jain chapter 33: X(N) <= min(N / (D + Z), 1 / D_max), R(N) >= max(D, N D_max - Z).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum

import numpy as np
import pandas as pd

from .._values import jsonable

__all__ = [
    "AsymptoticBounds",
    "Center",
    "CenterKind",
    "MVAResult",
    "asymptotic_bounds",
    "bottleneck",
    "mva",
]


class CenterKind(str, Enum):
    QUEUE = "queue"
    DELAY = "delay"
    MULTI = "multi"
    LOAD_DEPENDENT = "load_dependent"


@dataclass(frozen=True)
class Center:
    """One service center: its name, kind, total demand D = V * S per request, and for
    ``multi`` the number of servers m, for ``load_dependent`` the rate multiplier alpha(j)."""

    name: str
    kind: CenterKind
    demand: float
    servers: int = 1
    rate_multiplier: Callable[[int], float] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        try:
            kind = CenterKind(self.kind)
        except ValueError:
            choices = ", ".join(k.value for k in CenterKind)
            raise ValueError(f"center {self.name!r}: unknown kind {self.kind!r} (one of {choices})") from None
        object.__setattr__(self, "kind", kind)
        if not isinstance(self.demand, numbers.Real) or not math.isfinite(self.demand) or self.demand < 0:
            raise ValueError(f"center {self.name!r}: demand must be a finite number >= 0, got {self.demand!r}")
        object.__setattr__(self, "demand", float(self.demand))
        object.__setattr__(self, "servers", int(self.servers))
        if isinstance(self.servers, bool) or not isinstance(self.servers, numbers.Integral) or self.servers < 1:
            raise ValueError(f"center {self.name!r}: servers must be a positive integer, got {self.servers!r}")
        if kind is CenterKind.LOAD_DEPENDENT and self.rate_multiplier is None:
            raise ValueError(f"center {self.name!r}: a load_dependent center needs a rate_multiplier")
        if kind is not CenterKind.MULTI and self.servers != 1:
            raise ValueError(f"center {self.name!r}: only multi centers have several servers")

    @classmethod
    def queue(cls, name: str, demand: float) -> Center:
        return cls(name, CenterKind.QUEUE, demand)

    @classmethod
    def delay(cls, name: str, demand: float) -> Center:
        return cls(name, CenterKind.DELAY, demand)

    @classmethod
    def multi_server(cls, name: str, demand: float, servers: int) -> Center:
        """m identical servers: a load-dependent center with rate multiplier min(j, m)."""
        return cls(name, CenterKind.MULTI, demand, servers=servers)

    @classmethod
    def load_dependent(cls, name: str, demand: float, rate_multiplier: Callable[[int], float]) -> Center:
        """Service rate alpha(j) / S with j jobs present; alpha(1) = 1 makes D the demand of a lone job."""
        return cls(name, CenterKind.LOAD_DEPENDENT, demand, rate_multiplier=rate_multiplier)

    @property
    def is_load_dependent(self) -> bool:
        return self.kind in (CenterKind.MULTI, CenterKind.LOAD_DEPENDENT)

    def rate_multipliers(self, population: int) -> np.ndarray:
        """alpha(j) for j = 0..population (alpha(0) unused, set to 1)."""
        jobs = np.arange(population + 1)
        if self.kind is CenterKind.MULTI:
            alphas = np.minimum(jobs, self.servers).astype(float)
        elif self.kind is CenterKind.LOAD_DEPENDENT:
            assert self.rate_multiplier is not None
            alphas = np.array([1.0] + [float(self.rate_multiplier(j)) for j in range(1, population + 1)])
        else:
            alphas = np.ones(population + 1)
        alphas[0] = 1.0
        if not np.all(np.isfinite(alphas)) or np.any(alphas <= 0):
            raise ValueError(f"center {self.name!r}: rate multipliers must be positive and finite")
        return alphas

    def to_dict(self) -> dict:
        record: dict = {"name": self.name, "kind": self.kind.value, "demand": self.demand}
        if self.kind is CenterKind.MULTI:
            record["servers"] = self.servers
        return record


@dataclass(frozen=True)
class MVAResult:
    """MVA results for populations 1..N. Arrays are indexed [n - 1] (and [n - 1, center]).

    utilization: queue X D; multi X D / m (mean fraction of its servers busy);
    load_dependent 1 - P(0 | n) (Jain Box 36.1); delay NaN (no meaningful utilization).
    marginal_probabilities[name][n, j] = P(j jobs at the center | population n), for
    load-dependent (multi and load_dependent) centers, n and j in 0..N.
    """

    centers: tuple[Center, ...]
    think_time: float
    throughput: np.ndarray
    response_time: np.ndarray
    residence_time: np.ndarray
    queue_length: np.ndarray
    utilization: np.ndarray
    marginal_probabilities: dict[str, np.ndarray]

    @property
    def population(self) -> int:
        return int(self.throughput.size)

    @property
    def populations(self) -> np.ndarray:
        return np.arange(1, self.population + 1)

    @property
    def center_names(self) -> list[str]:
        return [center.name for center in self.centers]

    def center_index(self, name: str) -> int:
        try:
            return self.center_names.index(name)
        except ValueError:
            raise KeyError(f"no center named {name!r}") from None

    def system_frame(self) -> pd.DataFrame:
        """One row per population: population, throughput, response_time (Z excluded)."""
        return pd.DataFrame(
            {"population": self.populations, "throughput": self.throughput, "response_time": self.response_time}
        )

    def to_frame(self) -> pd.DataFrame:
        """One row per (population, center), with the system throughput and response time."""
        k = len(self.centers)
        return pd.DataFrame(
            {
                "population": np.repeat(self.populations, k),
                "center": self.center_names * self.population,
                "kind": [c.kind.value for c in self.centers] * self.population,
                "residence_time": self.residence_time.ravel(),
                "queue_length": self.queue_length.ravel(),
                "utilization": self.utilization.ravel(),
                "throughput": np.repeat(self.throughput, k),
                "response_time": np.repeat(self.response_time, k),
            }
        )

    def to_dict(self) -> dict:
        """Inputs, per-population results, and P(j | N) of load-dependent centers at N."""
        by_population = []
        for row, n in enumerate(self.populations):
            by_population.append(
                {
                    "population": n,
                    "throughput": self.throughput[row],
                    "response_time": self.response_time[row],
                    "centers": {
                        center.name: {
                            "residence_time": self.residence_time[row, i],
                            "queue_length": self.queue_length[row, i],
                            "utilization": self.utilization[row, i],
                        }
                        for i, center in enumerate(self.centers)
                    },
                }
            )
        n = self.population
        return jsonable(
            {
                "think_time": self.think_time,
                "population": n,
                "centers": [center.to_dict() for center in self.centers],
                "results": by_population,
                "marginal_probabilities": {
                    name: probs[n, : n + 1] for name, probs in self.marginal_probabilities.items()
                },
            }
        )


def mva(centers: Sequence[Center], population: int, think_time: float = 0.0) -> MVAResult:
    """Exact MVA (Jain chapter 34, load-dependent centers as in Box 36.1) for n = 1..population."""
    centers = tuple(centers)
    if not centers:
        raise ValueError("the network needs at least one center")
    names = [c.name for c in centers]
    if len(set(names)) != len(names):
        raise ValueError(f"center names must be unique, got {names}")
    if isinstance(population, bool) or not isinstance(population, numbers.Integral) or population < 1:
        raise ValueError(f"population must be a positive integer, got {population!r}")
    if not isinstance(think_time, numbers.Real) or not math.isfinite(think_time) or think_time < 0:
        raise ValueError(f"think time must be a finite number >= 0, got {think_time!r}")
    if think_time == 0 and all(c.demand == 0 for c in centers):
        raise ValueError("zero think time and zero demands: throughput is unbounded")

    n_max = int(population)
    solution = _solve(centers, n_max, float(think_time))
    demands = np.array([c.demand for c in centers])
    x = solution.throughput
    utilization = np.empty((n_max, len(centers)))
    for i, center in enumerate(centers):
        if center.kind is CenterKind.DELAY:
            utilization[:, i] = math.nan
        elif center.kind is CenterKind.QUEUE:
            utilization[:, i] = x * demands[i]
        elif center.kind is CenterKind.MULTI:
            utilization[:, i] = x * demands[i] / center.servers
        else:
            utilization[:, i] = 1.0 - solution.marginals[i][1:, 0]

    return MVAResult(
        centers=centers,
        think_time=float(think_time),
        throughput=x,
        response_time=solution.residence.sum(axis=1),
        residence_time=solution.residence,
        queue_length=solution.residence * x[:, None],
        utilization=utilization,
        marginal_probabilities={centers[i].name: probs for i, probs in solution.marginals.items()},
    )


@dataclass
class _Solution:
    throughput: np.ndarray  # X(n), n = 1..N
    residence: np.ndarray  # R_i(n), [n - 1, i]
    marginals: dict[int, np.ndarray]  # center index -> P_i(j | n), [n, j]


def _solve(centers: tuple[Center, ...], n_max: int, think_time: float) -> _Solution:
    """The MVA recursion over n = 1..n_max for one network.

    Box 36.1 takes P_i(0|n) = 1 - sum_{j>=1} P_i(j|n). That subtraction loses every digit
    once a multi-server center holds many jobs, and the recursion then multiplies the
    error by X D / j per step (64 workers came out 60 % off). So P_i(0|n) comes from the
    exact, subtraction-free identity P_i(0|n) = P_i(0|n-1) X(n) / X_{-i}(n), where X_{-i}
    is the throughput of the same network without center i (both sides are ratios of
    normalising constants, G_{-i}(n) / G(n)), computed by convolution (`_complement_throughputs`).
    """
    k = len(centers)
    demands = np.array([c.demand for c in centers])
    throughput = np.empty(n_max)
    residence = np.empty((n_max, k))
    queue_length = np.zeros(k)

    ld_index = [i for i, c in enumerate(centers) if c.is_load_dependent]
    demand_over_rate = {i: demands[i] / centers[i].rate_multipliers(n_max) for i in ld_index}
    complement_throughput = _complement_throughputs(centers, ld_index, n_max, think_time)
    marginals = {i: np.zeros((n_max + 1, n_max + 1)) for i in ld_index}
    for i in ld_index:
        marginals[i][0, 0] = 1.0

    for n in range(1, n_max + 1):
        r = np.empty(k)
        for i, center in enumerate(centers):
            if center.kind is CenterKind.DELAY:
                r[i] = demands[i]
            elif center.kind is CenterKind.QUEUE:
                r[i] = demands[i] * (1.0 + queue_length[i])
            else:
                jobs = np.arange(1, n + 1)
                r[i] = np.sum(jobs * demand_over_rate[i][1 : n + 1] * marginals[i][n - 1, :n])
        cycle = think_time + r.sum()
        x = n / cycle if cycle > 0 else math.inf
        throughput[n - 1] = x
        residence[n - 1] = r
        queue_length = x * r

        for i in ld_index:
            previous, current = marginals[i][n - 1], marginals[i][n]
            current[1 : n + 1] = x * demand_over_rate[i][1 : n + 1] * previous[:n]
            # The complement network without i can absorb jobs at no cost (X_{-i} = inf)
            # only if it has no think time and no demand: then every job sits at i.
            x_without = complement_throughput[i][n - 1]
            current[0] = 0.0 if math.isinf(x_without) else previous[0] * x / x_without

    return _Solution(throughput=throughput, residence=residence, marginals=marginals)


def _complement_throughputs(
    centers: tuple[Center, ...], skips: Sequence[int], n_max: int, think_time: float
) -> dict[int, np.ndarray]:
    """X_{-i}(n), n = 1..n_max, for each center i in `skips`: the throughput of the network
    without center i, G_{-i}(n - 1) / G_{-i}(n) (Buzen's normalising constants). G_{-i} is the
    convolution of every other center's factor (prefix and suffix products), so the cost is
    linear in the number of centers; solving each complement network by MVA, which needs its
    own complements, was exponential (2^k networks: minutes for a dozen load-dependent
    centers). Logarithms keep the constants in range at any population."""
    factors = [_log_factor(center, n_max) for center in centers]
    think = _log_factor(Center.delay("think", think_time), n_max)
    prefix = [think]
    for factor in factors:
        prefix.append(_log_convolve(prefix[-1], factor))
    suffix = [_log_unit(n_max)]
    for factor in reversed(factors):
        suffix.append(_log_convolve(suffix[-1], factor))
    suffix.reverse()  # suffix[i]: the centers from i on
    throughputs = {}
    for i in skips:
        log_g = _log_convolve(prefix[i], suffix[i + 1])
        with np.errstate(invalid="ignore"):
            ratio = log_g[:-1] - log_g[1:]
        # G_{-i}(n) = 0: nothing left takes time, X_{-i} is unbounded.
        throughputs[i] = np.where(np.isneginf(log_g[1:]), math.inf, np.exp(ratio))
    return throughputs


def _log_factor(center: Center, n_max: int) -> np.ndarray:
    """log f(j), j = 0..n_max: a center's term of the normalising constant with j jobs there,
    D^j / prod_{m<=j} alpha(m) (a delay's alpha(m) = m)."""
    jobs = np.arange(n_max + 1)
    if center.kind is CenterKind.DELAY:
        alphas = np.maximum(jobs, 1).astype(float)
    else:
        alphas = center.rate_multipliers(n_max)
    with np.errstate(divide="ignore"):
        log_demand = math.log(center.demand) if center.demand > 0 else -math.inf
        steps = np.where(jobs > 0, log_demand - np.log(alphas), 0.0)
    return np.cumsum(steps)


def _log_unit(n_max: int) -> np.ndarray:
    unit = np.full(n_max + 1, -math.inf)
    unit[0] = 0.0
    return unit


def _log_convolve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """log of the convolution of exp(a) and exp(b), entries 0..len - 1: row n of a matrix
    holds a[j] + b[n - j] for j <= n, and each row is summed in log space at once."""
    jobs = np.arange(len(a))
    shift = jobs[:, None] - jobs[None, :]
    terms = np.where(shift >= 0, a[None, :] + b[np.maximum(shift, 0)], -math.inf)
    top = terms.max(axis=1)
    safe_top = np.where(np.isneginf(top), 0.0, top)
    with np.errstate(divide="ignore"):
        return safe_top + np.log(np.exp(terms - safe_top[:, None]).sum(axis=1))


@dataclass(frozen=True)
class AsymptoticBounds:
    """Asymptotic bounds of a closed network (Jain chapter 33).

    total_demand D = sum of all demands; bottleneck_demand D_max = the largest demand per
    server among non-delay centers; knee_population N* = (D + Z) / D_max, the population
    beyond which the bottleneck saturates.
    """

    total_demand: float
    think_time: float
    bottleneck: str | None
    bottleneck_demand: float
    knee_population: float

    def throughput_bound(self, population: float) -> float:
        """X(N) <= min(N / (D + Z), 1 / D_max)."""
        light_load = population / (self.total_demand + self.think_time)
        if self.bottleneck_demand == 0:
            return light_load
        return min(light_load, 1.0 / self.bottleneck_demand)

    def response_time_bound(self, population: float) -> float:
        """R(N) >= max(D, N D_max - Z)."""
        return max(self.total_demand, population * self.bottleneck_demand - self.think_time)

    def to_dict(self) -> dict:
        return jsonable(
            {
                "total_demand": self.total_demand,
                "think_time": self.think_time,
                "bottleneck": self.bottleneck,
                "bottleneck_demand": self.bottleneck_demand,
                "knee_population": self.knee_population,
            }
        )


def bottleneck(centers: Sequence[Center], population: int | None = None) -> str | None:
    """Name of the center with the largest demand per server (delay centers never are).

    A multi center's demand per server is D / m; a load_dependent one's is D divided by
    its largest rate multiplier over 1..population (so it needs `population`).
    Returns None when every center is a delay center.
    """
    per_server = _demand_per_server(centers, population)
    if not per_server:
        return None
    return max(per_server, key=per_server.__getitem__)


def asymptotic_bounds(
    centers: Sequence[Center], think_time: float = 0.0, population: int | None = None
) -> AsymptoticBounds:
    """Bottleneck, D, D_max and N* for the network (see `bottleneck` for D_max)."""
    per_server = _demand_per_server(centers, population)
    total = float(sum(c.demand for c in centers))
    name = max(per_server, key=per_server.__getitem__) if per_server else None
    d_max = per_server[name] if name is not None else 0.0
    knee = (total + think_time) / d_max if d_max > 0 else math.inf
    return AsymptoticBounds(
        total_demand=total,
        think_time=float(think_time),
        bottleneck=name,
        bottleneck_demand=d_max,
        knee_population=knee,
    )


def _demand_per_server(centers: Sequence[Center], population: int | None) -> dict[str, float]:
    per_server: dict[str, float] = {}
    for center in centers:
        if center.kind is CenterKind.DELAY:
            continue
        if center.kind is CenterKind.LOAD_DEPENDENT:
            if population is None:
                raise ValueError(f"center {center.name!r} is load dependent: give the population to bound it")
            peak_rate = float(center.rate_multipliers(population)[1:].max())
        else:
            peak_rate = float(center.servers)
        per_server[center.name] = center.demand / peak_rate
    return per_server
