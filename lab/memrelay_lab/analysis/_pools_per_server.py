"""The network of queues of a middleware with one read pool and one write thread per server
(seeds 001/002's design; seed 002 §3, Figure 2, Tables 3-4).

Seed 002 models each server's GET queue as an M/M/m centre (m = the T read threads serving
it), each server's SET queue as an M/M/1 centre (one asynchronous write thread), and the
queue of replies waiting to be sent back as one M/M/1 centre every request visits. Visits
are uniform over the servers: V_get = reads / S per GET queue and V_set = writes / S per SET
queue (the seed's Table 3 prints 0.297 and 0.04 for 3 servers at 10 % writes); service
times per visit are the measured ones divided by the parallelism the seed saw (E[s]_get / T
and E[s]_set / sets in service). memrelay has one shared queue and pool instead; this
network is what the seeds' numbers are compared with, solved by the same exact MVA.
"""

from __future__ import annotations

from ..theory import Center, MVAResult, mva

__all__ = ["pools_per_server_centers", "pools_per_server_network"]


def pools_per_server_centers(
    servers: int, read_threads: int, get_visits: float, set_visits: float,
    get_service: float, set_service: float, response_service: float,
) -> list[Center]:
    """Seed 002's centres: per server a GET queue (m = read_threads, D = V_get S_get) and a SET
    queue (one server, D = V_set S_set), and one response queue (D = S_response, V = 1)."""
    if servers < 1 or read_threads < 1:
        raise ValueError(f"servers and read threads must be positive, got {servers} and {read_threads}")
    centers = []
    for server in range(1, servers + 1):
        centers.append(Center.multi_server(f"GET queue {server}", get_visits * get_service, read_threads))
        centers.append(Center.queue(f"SET queue {server}", set_visits * set_service))
    centers.append(Center.queue("response queue", response_service))
    return centers


def pools_per_server_network(
    servers: int, read_threads: int, clients: int, think_time: float, *, get_visits: float, set_visits: float,
    get_service: float, set_service: float, response_service: float,
) -> MVAResult:
    """Exact MVA of seed 002's network at populations 1..clients with think time Z."""
    centers = pools_per_server_centers(servers, read_threads, get_visits, set_visits, get_service, set_service,
                                       response_service)
    return mva(centers, population=clients, think_time=think_time)
