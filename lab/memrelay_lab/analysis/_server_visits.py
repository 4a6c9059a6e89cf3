"""Per-server centres of the closed network from per-server request counts (issue 14, item 6;
seed 002 section 3).

Each backend server i is its own queueing centre. Its visit ratio is V_i = requests sent to
server i / client requests (a get for several keys or a replicated set visits several
servers), its demand D_i = V_i S_i with S_i the service time per visit. The counts come from
memrelay's summary.json (per-server request counts) or from memcached stats deltas.
`server_centers` builds `theory.Center`s that `theory.mva` solves as separate centres;
`server_demands` measures each server's processor demand per client request from a results
folder; `server_network` solves, per configuration, the closed network of those centres with
everything else a request meets (middleware, network, clients) as one delay centre.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

import math

from ..theory import Center, CenterKind, mva

__all__ = ["server_centers", "server_demands", "server_network", "visit_ratios"]


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


def server_network(demands: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame | None:
    """Per configuration and server: exact MVA of the servers as queue centres (D_i from
    `server_demands`) plus a delay centre "rest" = the clients' response time minus the servers'
    demands (all a request spends elsewhere, seed 002 §3's think time and other devices as one),
    at the measured population N = clients. Columns: ``X_model``, ``X_measured``, per server
    ``U_model`` (= X_model D_i) beside ``U_measured``, ``Q_model`` (jobs at the server) and
    ``R_model_ms`` / ``R_measured_ms`` (the clients' response time). None without demands."""
    if demands is None or demands.empty:
        return None
    rows = []
    measured = table.set_index("configuration")
    for configuration, part in demands.groupby("configuration", sort=True):
        row = measured.loc[configuration]
        clients, response_ms = int(row.get("clients", 0) or 0), float(row.get("response_ms", math.nan))
        if clients < 1 or not math.isfinite(response_ms) or part["demand_us"].isna().any():
            continue
        servers = [Center(name=str(s), kind=CenterKind.QUEUE, demand=d / 1e3)
                   for s, d in zip(part["server"], part["demand_us"])]
        rest = max(response_ms - sum(c.demand for c in servers), 0.0)
        result = mva([*servers, Center(name="rest", kind=CenterKind.DELAY, demand=rest)], population=clients)
        x_model = float(result.throughput[-1]) * 1e3  # demands in ms: per ms to per second
        for i, (_, server) in enumerate(part.iterrows()):
            rows.append({
                "configuration": configuration, "server": int(server["server"]), "X_model": x_model,
                "X_measured": float(row["throughput"]), "R_model_ms": float(result.response_time[-1]),
                "R_measured_ms": response_ms, "U_model": float(result.utilization[-1, i]),
                "U_measured": float(server["utilization"]), "Q_model": float(result.queue_length[-1, i]),
            })
    return pd.DataFrame(rows) if rows else None
