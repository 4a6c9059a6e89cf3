"""Service rate of a read/write request mix (issue 14, item 5; seed 002 sections 1-2).

A server that handles gets at rate `mu_get` and sets at rate `mu_set` serves a mix with a
get share `p_get` at the harmonic-weighted rate 1/mu = p_get/mu_get + p_set/mu_set: the mean
service time of the mix is the share-weighted mean of the per-type service times.
`mix_mm1` / `mix_mmm` feed that rate into the M/M/1 and M/M/m models of `_queueing`.

Seed 002 §2.2 weights the rates instead, mu = p_get mu_get + p_set mu_set
(``weighting="rate"``), which overstates the mix's rate (a 1 % share of slow sets barely moves
it); its Table 1 comes out of that rule, and the rule is kept to reproduce it.
"""

from __future__ import annotations

from ._queueing import MM1, MMm, mm1, mmm

__all__ = ["mix_mm1", "mix_mmm", "mix_service_rate"]


WEIGHTINGS = ("time", "rate")


def mix_service_rate(get_share: float, get_rate: float, set_rate: float, weighting: str = "time") -> float:
    """Service rate of a mix with `get_share` gets (the rest sets), from the per-type rates:
    the inverse of the mean service time (``"time"``), or seed 002's mean of the rates (``"rate"``)."""
    if not 0.0 <= get_share <= 1.0:
        raise ValueError(f"get share must lie in [0, 1], got {get_share!r}")
    if get_rate <= 0 or set_rate <= 0:
        raise ValueError(f"service rates must be positive, got {get_rate!r} and {set_rate!r}")
    if weighting not in WEIGHTINGS:
        raise ValueError(f"weighting must be one of {', '.join(WEIGHTINGS)}, got {weighting!r}")
    if weighting == "rate":
        return get_share * get_rate + (1.0 - get_share) * set_rate
    mean_service_time = get_share / get_rate + (1.0 - get_share) / set_rate
    return 1.0 / mean_service_time


def mix_mm1(arrival_rate: float, get_share: float, get_rate: float, set_rate: float) -> MM1:
    """M/M/1 whose service rate is that of the read/write mix."""
    return mm1(arrival_rate, mix_service_rate(get_share, get_rate, set_rate))


def mix_mmm(arrival_rate: float, get_share: float, get_rate: float, set_rate: float, servers: int) -> MMm:
    """M/M/m with m = `servers`, each serving the mix at its mixed rate."""
    return mmm(arrival_rate, mix_service_rate(get_share, get_rate, set_rate), servers)
