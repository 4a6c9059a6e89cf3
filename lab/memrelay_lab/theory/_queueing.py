"""Single-queue models: M/M/1 (Jain Box 31.1) and M/M/m (Jain Box 31.2).

`mm1(arrival_rate, service_rate)` and `mmm(arrival_rate, service_rate, servers)` return
frozen result objects with every metric of the two boxes as a named attribute, methods for
the metrics that take an argument (P(n jobs), CDFs, q-percentiles), and `to_dict()` for
JSON. Seed 000 section 7 (Tables 21-30) uses exactly these formulas with the middleware's
measured throughput as arrival rate and its peak throughput as service rate.

Units: times come out in the reciprocal unit of the rates (rates in 1/s give seconds).
In M/M/m the service rate is the rate of ONE server (seed 000: peak throughput / m).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
from scipy import special

from .._values import jsonable

__all__ = ["MM1", "MMm", "UnstableSystemError", "mm1", "mmm"]

DEFAULT_PERCENTILES = (50.0, 90.0, 95.0, 99.0)
# Seed 000 Tables 22-25 list P(>= 5 jobs) and P(>= 10 jobs).
DEFAULT_AT_LEAST_JOBS = (5, 10)


class UnstableSystemError(ValueError):
    """The traffic intensity rho is >= 1: the queue grows without bound, no steady state."""

    def __init__(self, rho: float, arrival_rate: float, capacity: float):
        self.rho = rho
        super().__init__(
            f"unstable system: traffic intensity rho = {rho:.6g} >= 1 "
            f"(arrival rate {arrival_rate:g} >= total service rate {capacity:g})"
        )


@dataclass(frozen=True)
class _QueueMetrics:
    """What M/M/1 and M/M/m results share: the metrics of both boxes, argument-taking metrics
    and JSON output."""

    arrival_rate: float
    service_rate: float
    servers: int
    traffic_intensity: float
    utilization: float
    throughput: float
    prob_zero_jobs: float
    prob_queueing: float
    mean_jobs_in_system: float
    var_jobs_in_system: float
    mean_jobs_in_queue: float
    var_jobs_in_queue: float
    mean_response_time: float
    var_response_time: float
    mean_waiting_time: float
    var_waiting_time: float

    def response_time_percentile(self, q: float) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    def waiting_time_percentile(self, q: float) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    def prob_at_least_jobs(self, n: int) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    def to_dict(
        self,
        percentiles: Sequence[float] = DEFAULT_PERCENTILES,
        at_least_jobs: Sequence[int] = DEFAULT_AT_LEAST_JOBS,
    ) -> dict:
        """Every attribute, plus response/waiting time percentiles and P(>= n jobs)."""
        record = asdict(self)  # type: ignore[call-overload]
        record["response_time_percentiles"] = {
            _percentile_key(q): self.response_time_percentile(q) for q in percentiles
        }
        record["waiting_time_percentiles"] = {
            _percentile_key(q): self.waiting_time_percentile(q) for q in percentiles
        }
        record["prob_at_least_jobs"] = {str(n): self.prob_at_least_jobs(n) for n in at_least_jobs}
        return jsonable(record)


@dataclass(frozen=True)
class MM1(_QueueMetrics):
    """Metrics of an M/M/1 queue, Jain Box 31.1. Build it with `mm1()`."""

    mean_jobs_per_busy_period: float
    var_jobs_per_busy_period: float
    mean_busy_period: float
    var_busy_period: float

    @property
    def rho(self) -> float:
        return self.traffic_intensity

    def prob_jobs(self, n: int) -> float:
        """P(n jobs in system) = (1 - rho) rho^n."""
        _check_count(n)
        return (1.0 - self.rho) * self.rho**n

    def prob_at_least_jobs(self, n: int) -> float:
        """P(n or more jobs in system) = rho^n."""
        _check_count(n)
        return self.rho**n

    def prob_jobs_in_queue(self, k: int) -> float:
        """P(k jobs waiting): 1 - rho^2 for k = 0 (0 or 1 in system), (1 - rho) rho^(k+1) else."""
        _check_count(k)
        if k == 0:
            return 1.0 - self.rho**2
        return (1.0 - self.rho) * self.rho ** (k + 1)

    def response_time_cdf(self, t: float) -> float:
        """P(r <= t) = 1 - exp(-t mu (1 - rho))."""
        if t < 0:
            return 0.0
        return -math.expm1(-t * self.service_rate * (1.0 - self.rho))

    def waiting_time_cdf(self, t: float) -> float:
        """P(w <= t) = 1 - rho exp(-t mu (1 - rho)); the atom 1 - rho at t = 0 is an idle server."""
        if t < 0:
            return 0.0
        return 1.0 - self.rho * math.exp(-t * self.service_rate * (1.0 - self.rho))

    def response_time_percentile(self, q: float) -> float:
        """q-percentile of response time: E[r] ln(100 / (100 - q))."""
        _check_percentile(q)
        return self.mean_response_time * math.log(100.0 / (100.0 - q))

    def waiting_time_percentile(self, q: float) -> float:
        """q-percentile of waiting time: max(0, E[w]/rho ln(100 rho / (100 - q)))."""
        _check_percentile(q)
        return max(0.0, self.mean_waiting_time / self.rho * math.log(100.0 * self.rho / (100.0 - q)))

    def prob_busy_period_serves(self, n: int) -> float:
        """P(a busy period serves exactly n jobs) = C(2n-2, n-1) rho^(n-1) / (n (1+rho)^(2n-1))."""
        if n < 1:
            raise ValueError(f"a busy period serves at least one job, got n = {n}")
        log_p = (
            special.gammaln(2 * n - 1)
            - 2 * special.gammaln(n)
            - math.log(n)
            + (n - 1) * math.log(self.rho)
            - (2 * n - 1) * math.log1p(self.rho)
        )
        return float(math.exp(log_p))


@dataclass(frozen=True)
class MMm(_QueueMetrics):
    """Metrics of an M/M/m queue, Jain Box 31.2. Build it with `mmm()`.

    `service_rate` is per server; `prob_queueing` is Erlang's C formula (Jain's varrho).
    """


    @property
    def rho(self) -> float:
        return self.traffic_intensity

    def prob_jobs(self, n: int) -> float:
        """P(n jobs): p0 (m rho)^n / n! for n < m, p0 rho^n m^m / m! for n >= m."""
        _check_count(n)
        m, rho = self.servers, self.rho
        if n < m:
            log_p = n * math.log(m * rho) - special.gammaln(n + 1)
        else:
            log_p = n * math.log(rho) + m * math.log(m) - special.gammaln(m + 1)
        return float(self.prob_zero_jobs * math.exp(log_p))

    def prob_at_least_jobs(self, n: int) -> float:
        """P(n or more jobs): varrho rho^(n-m) for n >= m, else 1 - sum of P(j), j < n."""
        _check_count(n)
        if n >= self.servers:
            return self.prob_queueing * self.rho ** (n - self.servers)
        return 1.0 - sum(self.prob_jobs(j) for j in range(n))

    def prob_jobs_in_queue(self, k: int) -> float:
        """P(k jobs waiting): P(n <= m) = 1 - varrho rho for k = 0, P(m + k jobs) else."""
        _check_count(k)
        if k == 0:
            return 1.0 - self.prob_queueing * self.rho
        return self.prob_jobs(self.servers + k)

    def waiting_time_cdf(self, t: float) -> float:
        """P(w <= t) = 1 - varrho exp(-m mu (1 - rho) t)."""
        if t < 0:
            return 0.0
        return 1.0 - self.prob_queueing * math.exp(-self._queue_drain_rate * t)

    def response_time_cdf(self, t: float) -> float:
        """P(r <= t) for r = w + s, s ~ Exp(mu) independent of w (not in Jain's box).

        With probability 1 - varrho a job waits 0 and r = s; otherwise w ~ Exp(a) with
        a = m mu (1 - rho) and r is the sum of two exponentials (hypoexponential).
        """
        if t <= 0:
            return 0.0
        mu, delta = self.service_rate, self.prob_queueing
        no_wait = (1.0 - delta) * math.exp(-mu * t)
        waited = delta * _hypoexponential_survival(self._queue_drain_rate, mu, t)
        return 1.0 - (no_wait + waited)

    def response_time_percentile(self, q: float) -> float:
        """q-percentile of response time, solved numerically from `response_time_cdf`.

        Jain's Box 31.2 gives no closed form; for m = 1 this equals E[r] ln(100/(100-q)).
        """
        _check_percentile(q)
        if q == 0:
            return 0.0
        target = q / 100.0
        upper = self.mean_response_time
        while self.response_time_cdf(upper) < target:
            upper *= 2.0
        # The CDF is increasing: bisect until the bracket is as narrow as floats allow.
        lower = 0.0
        while upper - lower > 1e-15 * upper:
            middle = 0.5 * (lower + upper)
            if middle in (lower, upper):
                break
            if self.response_time_cdf(middle) < target:
                lower = middle
            else:
                upper = middle
        return upper

    def waiting_time_percentile(self, q: float) -> float:
        """q-percentile of waiting time: max(0, E[w]/varrho ln(100 varrho / (100 - q)))."""
        _check_percentile(q)
        if self.prob_queueing == 0.0:
            return 0.0
        return max(
            0.0,
            self.mean_waiting_time / self.prob_queueing * math.log(100.0 * self.prob_queueing / (100.0 - q)),
        )

    @property
    def _queue_drain_rate(self) -> float:
        # Rate at which a waiting job's wait ends: m mu - lambda = m mu (1 - rho).
        return self.servers * self.service_rate * (1.0 - self.rho)


def mm1(arrival_rate: float, service_rate: float) -> MM1:
    """M/M/1 metrics (Jain Box 31.1) for arrival rate lambda and service rate mu.

    Raises ValueError for non-positive rates and UnstableSystemError when rho >= 1.
    """
    lam = _positive("arrival_rate", arrival_rate)
    mu = _positive("service_rate", service_rate)
    rho = lam / mu
    if rho >= 1.0:
        raise UnstableSystemError(rho, lam, mu)
    idle = 1.0 - rho
    return MM1(
        arrival_rate=lam,
        service_rate=mu,
        servers=1,
        traffic_intensity=rho,
        utilization=rho,
        throughput=lam,
        prob_zero_jobs=idle,
        prob_queueing=rho,
        mean_jobs_in_system=rho / idle,
        var_jobs_in_system=rho / idle**2,
        mean_jobs_in_queue=rho**2 / idle,
        var_jobs_in_queue=rho**2 * (1.0 + rho - rho**2) / idle**2,
        mean_response_time=(1.0 / mu) / idle,
        var_response_time=(1.0 / mu**2) / idle**2,
        mean_waiting_time=rho * (1.0 / mu) / idle,
        var_waiting_time=(2.0 - rho) * rho / (mu**2 * idle**2),
        mean_jobs_per_busy_period=1.0 / idle,
        var_jobs_per_busy_period=rho * (1.0 + rho) / idle**3,
        mean_busy_period=1.0 / (mu * idle),
        # Busy period of M/G/1: E[B^2] = E[s^2] / (1 - rho)^3 with E[s^2] = 2 / mu^2.
        var_busy_period=(1.0 + rho) / (mu**2 * idle**3),
    )


def mmm(arrival_rate: float, service_rate: float, servers: int) -> MMm:
    """M/M/m metrics (Jain Box 31.2); `service_rate` is the rate of one of the m servers.

    Raises ValueError for non-positive rates or servers and UnstableSystemError when
    rho = lambda / (m mu) >= 1.
    """
    lam = _positive("arrival_rate", arrival_rate)
    mu = _positive("service_rate", service_rate)
    m = _server_count(servers)
    rho = lam / (m * mu)
    if rho >= 1.0:
        raise UnstableSystemError(rho, lam, m * mu)
    p0, delta = _erlang_p0_and_c(m, rho)
    idle = 1.0 - rho
    return MMm(
        arrival_rate=lam,
        service_rate=mu,
        servers=m,
        traffic_intensity=rho,
        utilization=rho,
        throughput=lam,
        prob_zero_jobs=p0,
        prob_queueing=delta,
        mean_jobs_in_system=m * rho + rho * delta / idle,
        var_jobs_in_system=m * rho + rho * delta * ((1.0 + rho - rho * delta) / idle**2 + m),
        mean_jobs_in_queue=rho * delta / idle,
        var_jobs_in_queue=delta * rho * (1.0 + rho - delta * rho) / idle**2,
        mean_response_time=(1.0 / mu) * (1.0 + delta / (m * idle)),
        var_response_time=(1.0 / mu**2) * (1.0 + delta * (2.0 - delta) / (m**2 * idle**2)),
        mean_waiting_time=delta / (m * mu * idle),
        var_waiting_time=delta * (2.0 - delta) / (m**2 * mu**2 * idle**2),
    )


def _erlang_p0_and_c(m: int, rho: float) -> tuple[float, float]:
    """p0 and the probability of queueing (Erlang C), summed in log space.

    1/p0 = sum_{n<m} (m rho)^n / n! + (m rho)^m / (m! (1 - rho)); the terms overflow a
    float for a few hundred servers, so they are combined with logsumexp.
    """
    offered_load = m * rho
    n = np.arange(m)
    log_terms = n * math.log(offered_load) - special.gammaln(n + 1)
    log_tail = m * math.log(offered_load) - special.gammaln(m + 1) - math.log1p(-rho)
    log_norm = special.logsumexp(np.append(log_terms, log_tail))
    return float(math.exp(-log_norm)), float(math.exp(log_tail - log_norm))


def _hypoexponential_survival(a: float, b: float, t: float) -> float:
    """P(X + Y > t) for independent X ~ Exp(a), Y ~ Exp(b).

    Equals (a e^{-bt} - b e^{-at}) / (a - b); rewritten around the smaller rate s as
    e^{-st} (1 + s t phi((big - s) t)), phi(x) = (1 - e^{-x}) / x, which neither cancels
    when a ~ b nor overflows for large t.
    """
    small, big = min(a, b), max(a, b)
    x = (big - small) * t
    phi = 1.0 if x == 0.0 else -math.expm1(-x) / x
    return math.exp(-small * t) * (1.0 + small * t * phi)


def _positive(name: str, value: float) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}") from None
    if not math.isfinite(number) or number <= 0.0:
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return number


def _server_count(servers: int) -> int:
    is_integer = isinstance(servers, (int, float, np.integer)) and not isinstance(servers, bool)
    if not is_integer or not math.isfinite(servers) or int(servers) != servers or servers < 1:
        raise ValueError(f"servers must be a positive integer, got {servers!r}")
    return int(servers)


def _check_count(n: int) -> None:
    if n < 0:
        raise ValueError(f"number of jobs must be >= 0, got {n}")


def _check_percentile(q: float) -> None:
    if not 0.0 <= q < 100.0:
        raise ValueError(f"percentile q must be in [0, 100), got {q}")


def _percentile_key(q: float) -> str:
    return f"{q:g}"
