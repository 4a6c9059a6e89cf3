"""The shaped links on a request's path, and the one queue they make in the models (issues 22, 33, 34).

## A link

Where the experiment knows a host's link rate (the testbed's tc shaping, or ``link_mbit`` of a
host in ``[hosts]``) and the run counted the bytes through that link over an interval long enough
(the testbed's veth counters: every header and acknowledgement included;
`results._links.link_interval_problem`), the link's demand is bytes per request x 8 / rate of its
busier direction, named after it (``link to H``: what the host receives; ``link from H``: what it
sends). The other direction is no centre: a shaped link serves each request's bytes at a constant
rate, and in a line of constant-rate servers a request that has passed the slowest one never
queues at another (Friedman 1965, the reduction of tandem queues): its bytes are on the wire
while the busier direction serves the next request. Two exponential queues instead would have 2
clients wait a third of their time on a balanced link that the testbed shows them not to.

## The path: one queue for its busiest link

The same reduction holds across hosts. A read through a middleware crosses the client's link
(out), the middleware's (in and out), the server's (in and out), and back the same way: links in
series, each at a constant rate. By Friedman's reduction the tandem passes requests as its
slowest link alone would; the others add at most their transmission times as a constant delay.
A tbf adds not even those: it passes a packet at once while its bucket holds tokens (the
testbed's bucket holds 32 KiB or 2 ms of the rate, some 28 replies of 1 KiB at 8 Mbit/s), so a
link below its rate only caps the rate and delays nothing. So every link of the path together
is one queue (one server) with the busiest link's demand, named after that link; the others are
no centre and no delay. Links of several hosts of one role are parallel rather than in series (a
request crosses one of them), each carrying its share of the requests: its demand per request of
the system is that share, and the busiest of them still bounds the throughput at 1 / D.

With every testbed host shaped (8 Mbit/s, 1 KiB reads: about 1.2 ms per request on the
middleware's link, 1.1 ms on the client's and the server's), a queue per link added some 3.5 ms
to every cycle that the tbfs do not, and at 2 clients the model predicted 48% too low.

The links that are not the queue are still shown with their demands, and their utilization is
X x D (the utilization law holds whether or not a link queues), so the busiest link is also the
busiest of them all and the bottleneck's name does not depend on the reduction.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

__all__ = ["busier_directions", "is_link", "link_demands", "link_utilizations", "path_queue"]

_LINK_BYTES = re.compile(r"^link:(?P<host>.+):(?P<direction>to|from)_bytes_per_request$")


def is_link(name: object) -> bool:
    """A link direction's demand name (``link to H`` / ``link from H``)."""
    return isinstance(name, str) and name.startswith("link ")


def link_demands(row: pd.Series, middlewares: int = 1, both: bool = False) -> tuple[tuple[str, float], ...]:
    """Each link with a known rate and measured bytes (module docstring): its busier direction's
    name (``link to H`` or ``link from H``) and its demand in seconds per request of one
    middleware's network, M x bytes x 8 / rate (``both``: every direction)."""
    by_host: dict[str, list[tuple[float, str]]] = {}
    for column in row.index:
        match = _LINK_BYTES.match(str(column))
        if match is None:
            continue
        rate = row.get(f"link:{match['host']}:rate_mbit", math.nan)
        per_request = row[column]
        if rate is None or per_request is None or not (np.isfinite(rate) and np.isfinite(per_request)) or rate <= 0:
            continue
        demand = middlewares * float(per_request) * 8 / (float(rate) * 1e6)
        by_host.setdefault(match["host"], []).append((demand, f"link {match['direction']} {match['host']}"))
    if both:
        return tuple(sorted((name, demand) for found in by_host.values() for demand, name in found))
    return tuple(sorted((name, demand) for demand, name in (max(found) for found in by_host.values())))


def busier_directions(demands: Mapping[str, float]) -> dict[str, float]:
    """Of demands named ``link to H`` / ``link from H`` (and others), each host's busier
    direction only (module docstring); the others pass through."""
    best: dict[str, tuple[float, str]] = {}
    others = {}
    for name, demand in demands.items():
        parts = name.split(" ", 2)
        if len(parts) == 3 and parts[0] == "link" and parts[1] in ("to", "from"):
            best[parts[2]] = max(best.get(parts[2], (-1.0, "")), (demand, name))
        else:
            others[name] = demand
    return {**others, **{name: demand for demand, name in best.values()}}


def path_queue(links: Iterable[tuple[str, float]]) -> tuple[str, float] | None:
    """The one queue a request's links make (module docstring): the busiest link's name and
    demand; None without a link of positive demand. Ties go to the first name in order, so the
    bottleneck named does not depend on the order the links came in."""
    found = [(name, float(demand)) for name, demand in links if float(demand) > 0]
    if not found:
        return None
    return min(found, key=lambda item: (-item[1], item[0]))


def link_utilizations(throughput: float, links: Iterable[tuple[str, float]]) -> dict[str, float]:
    """Each link's utilization X x D (the utilization law; demands per request of `throughput`)."""
    return {name: throughput * float(demand) for name, demand in links}
