"""Per-server centres of the closed network from per-server request counts (issue 14, item 6;
seed 002 section 3).

Each backend server i is its own queueing centre. Its visit ratio is V_i = requests sent to
server i / client requests (a get for several keys or a replicated set visits several
servers), its demand D_i = V_i S_i with S_i the service time per visit. The counts come from
memrelay's summary.json (per-server request counts) or from memcached stats deltas.
`server_centers` builds `theory.Center`s that `theory.mva` solves as separate centres.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..theory import Center, CenterKind

__all__ = ["server_centers", "visit_ratios"]


def visit_ratios(server_requests: Mapping[str, float], client_requests: float) -> dict[str, float]:
    """V_i = requests to server i / client requests, for every server."""
    if client_requests <= 0:
        raise ValueError(f"client requests must be positive, got {client_requests!r}")
    return {name: count / client_requests for name, count in server_requests.items()}


def server_centers(
    server_requests: Mapping[str, float],
    client_requests: float,
    service_times: Mapping[str, float],
    kind: CenterKind = CenterKind.QUEUE,
) -> list[Center]:
    """One centre per server with demand D_i = V_i S_i (S_i: service time per visit to server i)."""
    missing = set(server_requests) - set(service_times)
    if missing:
        raise ValueError(f"no service time for servers {sorted(missing)}")
    return [
        Center(name=name, kind=kind, demand=visits * service_times[name])
        for name, visits in visit_ratios(server_requests, client_requests).items()
    ]
