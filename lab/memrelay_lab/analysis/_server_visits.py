"""Per-server centres of the closed network from per-server request counts (issue 14, item 6;
seed 002 section 3).

Each backend server i is its own queueing centre. Its visit ratio is V_i = requests sent to
server i / client requests (a get for several keys or a replicated set visits several
servers), its demand D_i = V_i S_i with S_i the service time per visit. The counts come from
memrelay's summary.json (per-server request counts) or from memcached stats deltas.
`server_centers` builds `theory.Center`s that `theory.mva` solves as separate centres;
`server_demands` measures each server's processor demand per client request from a results
folder.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from ..theory import Center, CenterKind

__all__ = ["server_centers", "server_demands", "visit_ratios"]


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


def server_demands(servers: pd.DataFrame, processes: pd.DataFrame, runs: pd.DataFrame,
                   config_columns: list[str]) -> pd.DataFrame | None:
    """Every backend server as a queueing centre, per configuration (means over repetitions):
    ``visits`` V_i (requests the middlewares sent server i per client request), ``utilization``
    U_i (memcached's processor time per second, cpu.json), ``demand_us`` D_i = U_i / X (the
    utilization law, X the clients' throughput: processor time per client request),
    ``service_us`` S_i = D_i / V_i per visit, and ``throughput_bound`` 1 / max D_i, the most the
    servers' processors allow (the asymptotic bound of the bottleneck server). None without
    per-server counts or sampled processes."""
    if servers.empty or processes.empty or "middleware_requests" not in servers:
        return None
    cpu = processes[processes["role"] == "memcached"].assign(
        server=lambda f: f["process"].str.rsplit("-", n=1).str[1].astype(int))
    merged = servers.merge(cpu[["run_id", "server", "cpu_utilization"]], on=["run_id", "server"], how="inner")
    clients = runs[runs["source"] == "clients"].set_index("run_id")
    merged = merged[merged["middleware_requests"].notna() & merged["run_id"].isin(clients.index)]
    if merged.empty:
        return None
    throughput = merged["run_id"].map(clients["throughput"])
    client_requests = merged["run_id"].map(clients["count_total"])
    merged = merged.assign(
        visits=merged["middleware_requests"] / client_requests,
        utilization=merged["cpu_utilization"],
        demand_us=1e6 * merged["cpu_utilization"] / throughput,
    )
    merged["service_us"] = merged["demand_us"] / merged["visits"]
    keys = ["configuration", *[c for c in config_columns if c in merged], "server"]
    frame = merged.groupby(keys, sort=True, dropna=False)[["visits", "utilization", "demand_us", "service_us"]].mean()
    frame = frame.reset_index()
    frame["throughput_bound"] = frame.groupby("configuration")["demand_us"].transform(lambda d: 1e6 / d.max())
    return frame
