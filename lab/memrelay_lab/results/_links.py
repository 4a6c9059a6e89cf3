"""The links of a run's hosts: their rates from the manifest's environment, and the bytes through
each one per request from a run's cpu.json (the link counters the processor sampler reads,
`experiment._link_bytes`), but only over an interval long enough for them (issue 33)."""

from __future__ import annotations

import math

__all__ = ["LINK_MIN_INTERVAL_S", "LINK_MIN_REQUESTS_PER_CLIENT", "link_interval_problem", "link_measures", "link_rates"]


def link_rates(manifest: dict) -> dict[str, float]:
    """Each host's link rate (Mbit/s) where the environment knows it (the testbed's shaping,
    ``link_mbit`` in ``[hosts]``)."""
    hosts = (manifest.get("environment") or {}).get("hosts") or {}
    return {name: float(facts["link_rate_mbit"]) for name, facts in hosts.items()
            if facts.get("link_rate_mbit") is not None}


# Bytes per request through a link is counted bytes over the requests the clients completed in
# the same interval (their mean throughput times its length). At the interval's ends up to one
# request per client is under way, its bytes partly in and partly out: an error of up to N / (X T)
# requests. Below these the number would be noise (issue 33: over 0.75 s a 1 KiB read came out
# as 98 to 1,391 bytes), and the lab gives a warning instead of a number.
LINK_MIN_INTERVAL_S = 1.0
LINK_MIN_REQUESTS_PER_CLIENT = 50  # N / (X T) <= 2%


def link_interval_problem(seconds: float, requests: float, population: float) -> str | None:
    """Why an interval is too short for bytes per request on a link (None: long enough)."""
    if not seconds >= LINK_MIN_INTERVAL_S:
        return f"{seconds:.2f} s counted, at least {LINK_MIN_INTERVAL_S:g} s needed"
    if not requests >= LINK_MIN_REQUESTS_PER_CLIENT * population:
        return (f"{requests:,.0f} requests counted for {population:,.0f} clients, at least "
                f"{LINK_MIN_REQUESTS_PER_CLIENT} per client needed (requests under way at the ends would be "
                f"{100 * population / max(requests, 1):.0f}% of them)")
    return None


def link_measures(document: dict, throughput: float, rates: dict[str, float], population: float = 1.0,
                  requests_between=None) -> dict:
    """Per host link the run measured (cpu.json's ``links``): ``link:HOST:to_bytes_per_request``
    and ``link:HOST:from_bytes_per_request`` (the link's counters over their interval, the kept
    one, ``links_interval_unix``; results of an earlier lab: the network snapshots'), over the
    requests the clients completed in it at their mean throughput), and
    ``link:HOST:rate_mbit`` where the rate is known. ``link:interval_s`` is that interval; when
    it is too short (`link_interval_problem`) the bytes per request are NaN and
    ``link:too_short`` is 1 (the summary warns)."""
    links = document.get("links") or {}
    interval = document.get("links_interval_unix") or document.get("network_interval_unix")
    if not links or not interval or not throughput or not math.isfinite(throughput):
        return {}
    seconds = max(interval[1] - interval[0], 1e-9)
    requests = requests_between(*interval) if requests_between is not None else throughput * seconds
    short = link_interval_problem(seconds, requests, population) is not None
    measures: dict[str, float] = {"link:interval_s": seconds, "link:too_short": float(short)}
    for host, counted in sorted(links.items()):
        for direction in ("to", "from"):
            per_request = counted[f"{direction}_host_bytes"] / requests
            measures[f"link:{host}:{direction}_bytes_per_request"] = math.nan if short else per_request
        if host in rates:
            measures[f"link:{host}:rate_mbit"] = rates[host]
    return measures
