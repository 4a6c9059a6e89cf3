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

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..theory import Center, MVAResult, mva
from ._inputs import MS

__all__ = ["pools_per_server_centers", "pools_per_server_network", "pools_per_server_table", "seed_think_time_ms"]


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


def _read_set_times(row: pd.Series) -> tuple[float, float, float, float]:
    """(E[s]_read ms, E[s]_set ms, read rate, set rate) on the middleware: per type, response
    time minus the request queue's (the time a request holds a worker and the reply path)."""
    out = []
    for kinds in (("get", "multiget"), ("set",)):
        time = rate = 0.0
        for kind in kinds:
            r = float(row.get(f"mw_throughput_{kind}", math.nan))
            s = float(row.get(f"mw_response_{kind}_ms", math.nan)) - float(row.get(f"mw_queue_{kind}_ms", math.nan))
            if np.isfinite(r) and r > 0 and np.isfinite(s):
                time, rate = time + r * s, rate + r
        out.append((time / rate if rate else math.nan, rate))
    return out[0][0], out[1][0], out[0][1], out[1][1]


def seed_think_time_ms(clients: float, throughput: float, response_ms: float) -> float:
    """Z = N/X − R (ms), seed 002 Table 3's think time (its Table 5: N, X and R on the clients)."""
    return clients / throughput * 1e3 - response_ms


def pools_per_server_table(table: pd.DataFrame, config_columns: Sequence[str]) -> pd.DataFrame | None:
    """Seed 002 §3's network for every configuration with a pool middleware and per-type times
    (None when none has them), one network per middleware (N/M clients, X/M):

    - V_get = read share / servers, V_set = write share / servers (per GET and SET queue), V = 1
      at the response queue (Table 3);
    - m = workers / servers read threads per GET queue (the seed's threads per queue manager);
    - S_get = E[s]_read − D_reply, S_set = E[s]_set − D_reply per visit, E[s] the middleware's
      response minus queue time per type, D_reply = the response queue's service time: the net
      thread's demand of the main network (`_network.measured_demands`: R_mw − T_queue −
      T_service, or the split's net part), the time memrelay spends sending a reply back;
      S_set is divided by the sets in service, as the seed divides it (its asynchronous set
      thread had 1 to 3.8 sets in service, Table 1): a ``sets_in_service`` column where the
      table has one, else m, the threads memrelay can serve a server's sets with at once (its
      pool serves both types: there is no set thread);
    - Z = N/X − R on the clients (the seed's think time, Table 3 = Table 5) plus the network
      delay R_client − R_mw, both outside the middleware's centres (as think time).

    The seed also divides S_get by the threads (its "normalisation"), which counts the pool's
    parallelism twice (m servers each at 1/m of the time); its throughput is given beside
    (`throughput_seed_normalised`). Bottleneck: the centre of highest utilization."""
    from ._network import measured_demands  # noqa: PLC0415 (the main network's demands)

    needed = {"mw_throughput_get", "mw_response_get_ms", "mw_queue_get_ms", "workers", "servers", "middlewares",
              "throughput", "response_ms", "mw_response_ms", "mw_queue_ms", "mw_service_ms", "clients"}
    if not needed <= set(table.columns):
        return None
    rows = []
    for _, row in table.iterrows():
        middlewares, workers, servers = (float(row.get(c, 0) or 0) for c in ("middlewares", "workers", "servers"))
        if middlewares <= 0 or workers <= 0 or servers <= 0 or row.get("engine", "pool") != "pool":
            continue
        read_ms, set_ms, read_rate, set_rate = _read_set_times(row)
        x_measured = float(row["throughput"]) / middlewares
        if read_rate + set_rate <= 0 or not np.isfinite(x_measured) or x_measured <= 0:
            continue
        demands = measured_demands(row)
        reply_ms = demands.net_thread / MS
        s = int(servers)
        threads = max(int(round(workers / servers)), 1)
        read_share = read_rate / (read_rate + set_rate)
        v_get, v_set = read_share / s, (1 - read_share) / s
        s_get = max(read_ms - reply_ms, 0.0) if read_rate else 0.0
        in_service = float(row.get("sets_in_service", math.nan) or math.nan)
        if not (np.isfinite(in_service) and in_service > 0):
            in_service = float(threads)
        s_set = max(set_ms - reply_ms, 0.0) / in_service if set_rate else 0.0
        population = demands.population
        think_ms = seed_think_time_ms(population, x_measured, float(row["response_ms"]))
        network_ms = demands.network / MS
        outside = max(think_ms, 0.0) + network_ms
        kwargs = dict(get_visits=v_get, set_visits=v_set, set_service=s_set * MS, response_service=reply_ms * MS)
        result = pools_per_server_network(s, threads, population, outside * MS, get_service=s_get * MS, **kwargs)
        seed = pools_per_server_network(s, threads, population, outside * MS, get_service=s_get * MS / threads,
                                        **kwargs)
        record = {c: row[c] for c in config_columns if c in table}
        x = float(result.throughput[-1])
        record.update({
            "population": population, "think_time_ms": think_ms, "network_ms": network_ms, "servers": s,
            "read_threads": threads, "sets_in_service": in_service, "visits_get": v_get, "visits_set": v_set, "get_service_ms": s_get,
            "set_service_ms": s_set, "response_queue_service_ms": reply_ms,
            "throughput_measured": x_measured, "throughput_predicted": x,
            "throughput_error": x / x_measured - 1, "throughput_seed_normalised": float(seed.throughput[-1]),
            "response_ms_measured": float(row["mw_response_ms"]),
            "response_ms_predicted": (float(result.response_time[-1])) / MS,
        })
        names = result.center_names
        groups = {"get": [i for i, n in enumerate(names) if n.startswith("GET")],
                  "set": [i for i, n in enumerate(names) if n.startswith("SET")],
                  "response_queue": [names.index("response queue")]}
        visits = {"get": v_get, "set": v_set, "response_queue": 1.0}
        for kind, index in groups.items():
            residence = float(result.residence_time[-1, index].sum())
            record[f"{kind}_jobs"] = float(result.queue_length[-1, index].sum())
            record[f"{kind}_response_ms"] = residence / (len(index) * visits[kind]) / MS if visits[kind] else math.nan
            record[f"{kind}_throughput"] = x * visits[kind]  # per queue: X V_i (Forced Flow law)
            record[f"{kind}_utilization"] = float(np.nanmax(result.utilization[-1, index]))
        busiest = max(groups, key=lambda k: record[f"{k}_utilization"])
        record["bottleneck"] = {"get": "GET queues", "set": "SET queues", "response_queue": "response queue"}[busiest]
        for kind in ("get", "set"):
            record[f"{kind}_mw_response_ms_measured"] = float(row.get(f"mw_response_{kind}_ms", math.nan))
        rows.append(record)
    return pd.DataFrame(rows) if rows else None
