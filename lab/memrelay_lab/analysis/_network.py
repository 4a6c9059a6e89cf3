"""Queueing models of the memrelay network (MVA) built from what an experiment measured (seed 000 §7, seed 002 §3).

Input: the configuration table of `_inputs`.

## Network of queues (seed 000 §7.4, Figure 28)

Derivation choices:

1. **One network per middleware.** Each bench instance talks to one middleware and the
   servers are delay centers, so the M middlewares are M independent closed networks of
   N/M clients each (N/M rounded to the nearest integer). The system's predicted
   throughput is M X(N/M); measured per-middleware throughput is X / M.
2. **Think time Z = 0.** memrelay-bench is closed-loop without think time. The time a
   request spends outside the middleware (network both ways, the client's own processing)
   is the **network** delay center, D_network = R_client - R_mw (seeds 000 and 004: the
   client-side minus the middleware-side response time).
3. **Net thread** (a queue, one server): D_net = the time in memrelay outside the request
   queue and outside the servers, R_mw - T_queue - T_service (seed 000's rule), unless
   per-request timestamps give the split (below), in which case D_net is the mean
   arrival -> enqueue time.
4. **Worker pool** (a multi-server center, m = worker threads): a pool worker blocks while
   the servers answer (DESIGN.md: it writes to the servers, then reads every reply), so
   the time at the servers is part of what a request holds a worker for:
   D_workers = T_service + worker's own time (dequeue -> first send plus last reply ->
   reply written, from the split; 0 without it). The **servers** are a delay center
   *inside* the worker's service: their predicted response time is D_servers = T_service,
   and the worker pool's own predicted response time is its residence minus that delay.
   ``variant="seed"`` instead puts the servers in series as their own delay center with
   the workers holding only their own time (seed 000 Figure 28). That lets a worker take the
   next request while the previous one is at the server, so it over-predicts capacity
   whenever the servers' time is not negligible; it is kept for comparison with the seed.
5. **Split.** With ``request_log_sample`` the middleware logs every N-th request with all
   six timestamps, and the table carries mw_net_ms (arrival -> enqueue) and
   mw_worker_ms (dequeue -> first send plus last reply -> reply written). Without it
   all of R_mw - T_queue - T_service goes to the net thread.
6. **Demands from which run.** ``demands="each"`` (default, as seed 000 did): every
   configuration gets the demands its own measurements give and the model is solved at its
   population. ``demands="lowest"``: demands come from the lowest client count of each
   group of configurations that differ only in clients, and the same model predicts every
   population of the group (a true prediction, but blind to service times that grow with
   load).

7. **Links** (issue 22). Where the experiment knows a host's link rate (the testbed's tc
   shaping, or ``link_mbit`` of a host in ``[hosts]``) and the run counted the bytes through
   that link (the testbed's veth counters: every header and acknowledgement included), each
   direction of the link is a queue (one server: a link sends one frame at a time) with
   D = bytes per request through it x 8 / rate: ``link to H`` (what the host receives) and
   ``link from H`` (what it sends). The bytes per request come from the same run as the
   other demands (or from the lowest population, ``demands="lowest"``); nothing is fitted to
   the throughput. A link carries the traffic of every middleware while each network here is
   one middleware's, so its demand per request of one middleware's network is M x D (the
   link's utilization is then right; its response time is approximate for M > 1).
   With ``demands="each"`` the links are *not* centres of the solved network: each
   configuration's measured times already contain whatever the links made requests wait
   (the servers' time for a server host's link, the network delay for a client host's), and
   a link centre would count it again. They still enter the asymptotic bounds, and their
   utilization (X D) competes for the bottleneck. With ``demands="lowest"`` they are centres:
   the lowest population's times hold little link waiting, and without the links the model
   would predict the other populations far past the link's capacity. There a link's
   passage time at light load is counted on top of the measured times: on a wire its
   transmission time is in them already; on the testbed's tbf, which lets packets through at
   once while its bucket holds tokens, it is not in them at all. Either way the predicted
   response time is too high at light load by up to the links' demands, and the throughput
   bound 1 / D_max is unaffected.

Predicted against measured, per middleware: X; response time of the net thread
(measured: the residual R_mw - T_queue - T_service, or the split's net part), of the
worker pool's queue wait (measured: T_queue; predicted: the pool's residence minus its
demand), of the servers (measured: T_service), of the network (measured: R_client - R_mw,
which is the input, so it matches by construction at the population it came from) and in
total (measured: R_client); the utilization of the net thread and the worker pool
(predicted; measured values would be the same utilization law applied to the inputs);
the request queue length (measured: memrelay's mean length seen on enqueue; predicted:
jobs waiting for a worker, Q_workers - X D_workers, at population N - 1 because an
arriving request sees the network with itself removed: the arrival theorem). The
bottleneck is the center with the highest predicted utilization at N (seed 000 §7.4.2),
a link among them;
the asymptotic bottleneck (largest demand per server) and knee N* come with it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .._values import configuration_label, jsonable, plain
from ..theory import Center, asymptotic_bounds, mva

from ._inputs import MS, check_table, config_columns_of, population_groups

__all__ = ["Demands", "NetworkModel", "build_centers", "link_columns", "link_demands", "measured_demands", "network_model"]

VARIANTS = ("nested", "seed")
DEMAND_SOURCES = ("each", "lowest")

_DEMAND_COLUMNS = ("net_thread_ms", "workers_own_ms", "servers_ms", "network_ms", "workers_demand_ms")


@dataclass(frozen=True)
class Demands:
    """Service demands of one middleware's network, in seconds per request."""

    net_thread: float
    workers_own: float
    servers: float
    network: float
    workers: int
    population: int
    split_measured: bool
    #: (centre name, demand in seconds per request of this middleware's network) per link
    #: direction whose rate and bytes are known (module docstring, 7).
    links: tuple[tuple[str, float], ...] = ()

    def centers(self, variant: str = "nested") -> list[Center]:
        return build_centers(self, variant)


def build_centers(demands: Demands, variant: str = "nested", links: bool = True) -> list[Center]:
    """The centers of one middleware's network (see the module docstring); ``links=False``
    leaves the link directions out."""
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {', '.join(VARIANTS)}, got {variant!r}")
    links = [Center.queue(name, demand) for name, demand in demands.links] if links else []
    if variant == "nested":
        return [
            Center.queue("net-thread", demands.net_thread),
            Center.multi_server("workers", demands.workers_own + demands.servers, demands.workers),
            Center.delay("network", demands.network),
            *links,
        ]
    return [
        Center.queue("net-thread", demands.net_thread),
        Center.multi_server("workers", demands.workers_own, demands.workers),
        Center.delay("servers", demands.servers),
        Center.delay("network", demands.network),
        *links,
    ]


_LINK_BYTES = re.compile(r"^link:(?P<host>.+):(?P<direction>to|from)_bytes_per_request$")


def link_demands(row: pd.Series, middlewares: int = 1) -> tuple[tuple[str, float], ...]:
    """Each link direction with a known rate and measured bytes: (``link to H`` or ``link
    from H``, seconds per request of one middleware's network = M x bytes x 8 / rate)."""
    found = []
    for column in row.index:
        match = _LINK_BYTES.match(str(column))
        if match is None:
            continue
        rate = row.get(f"link:{match['host']}:rate_mbit", math.nan)
        per_request = row[column]
        if rate is None or per_request is None or not (np.isfinite(rate) and np.isfinite(per_request)) or rate <= 0:
            continue
        found.append((f"link {match['direction']} {match['host']}",
                      middlewares * float(per_request) * 8 / (float(rate) * 1e6)))
    return tuple(sorted(found))


@dataclass(frozen=True)
class NetworkModel:
    """MVA predictions next to the measurements, one row per configuration.

    `comparison` columns: the configuration columns, then for each metric m
    ``m_predicted`` and ``m_measured`` (times in ms, rates per second, per middleware unless
    the name says system). `demands` holds the inputs (ms). `long()` gives one row per
    (configuration, metric) as seed 000 Tables 32-33 list them.
    """

    variant: str
    demands_from: str
    config_columns: tuple[str, ...]
    demands: pd.DataFrame
    comparison: pd.DataFrame
    notes: tuple[str, ...] = field(default=())

    METRICS = (
        ("system_throughput", "Throughput, all middlewares (req/s)"),
        ("throughput", "Throughput per middleware (req/s)"),
        ("net_thread_response_ms", "Response time net thread (ms)"),
        ("queue_wait_ms", "Response time worker pool: queue wait (ms)"),
        ("workers_own_ms", "Response time worker pool: own work (ms)"),
        ("servers_response_ms", "Response time servers (ms)"),
        ("network_response_ms", "Response time network (ms)"),
        ("response_ms", "Total response time (ms)"),
        ("net_thread_utilization", "Utilization of net thread"),
        ("workers_utilization", "Utilization of worker pool"),
        ("queue_length", "Request queue length"),
    )

    def long(self) -> pd.DataFrame:
        rows = []
        for _, row in self.comparison.iterrows():
            config = {c: row[c] for c in self.config_columns}
            for metric, label in self.METRICS:
                rows.append(
                    {
                        **config,
                        "metric": label,
                        "predicted": row.get(f"{metric}_predicted", math.nan),
                        "measured": row.get(f"{metric}_measured", math.nan),
                    }
                )
        return pd.DataFrame(rows)

    def to_dict(self) -> dict:
        return jsonable(
            {
                "variant": self.variant,
                "demands_from": self.demands_from,
                "notes": list(self.notes),
                "units": {"time": "ms", "rate": "requests per second"},
                "configurations": [
                    {
                        "configuration": {c: plain(row[c]) for c in self.config_columns},
                        "demands_ms": {**{k: row[k] for k in _DEMAND_COLUMNS},
                                       **{k: row[k] for k in row.index if _is_link_column(k) and pd.notna(row[k])}},
                        "population_per_middleware": row["population"],
                        "bottleneck": row["bottleneck"],
                        "asymptotic_bottleneck": row["asymptotic_bottleneck"],
                        "knee_population": row["knee_population"],
                        "predicted": {m: row[f"{m}_predicted"] for m, _ in self.METRICS},
                        "measured": {m: row[f"{m}_measured"] for m, _ in self.METRICS},
                    }
                    for (_, row) in self.comparison.iterrows()
                ],
            }
        )



def measured_demands(row: pd.Series) -> Demands:
    """Demands (seconds) of one middleware's network from one configuration's means."""
    middlewares = int(row["middlewares"])
    r_mw = float(row["mw_response_ms"])
    t_queue = float(row["mw_queue_ms"])
    t_service = float(row["mw_service_ms"])
    residual = max(r_mw - t_queue - t_service, 0.0)
    net = row.get("mw_net_ms", math.nan)
    own = row.get("mw_worker_ms", math.nan)
    split = net is not None and own is not None and np.isfinite(net) and np.isfinite(own)
    if not split:
        net, own = residual, 0.0
    network = max(float(row["response_ms"]) - r_mw, 0.0)
    population = max(int(round(float(row["clients"]) / middlewares)), 1)
    return Demands(
        net_thread=float(net) * MS,
        workers_own=float(own) * MS,
        servers=t_service * MS,
        network=network * MS,
        workers=int(row["workers"]),
        population=population,
        split_measured=bool(split),
        links=link_demands(row, middlewares),
    )


def network_model(
    table: pd.DataFrame,
    *,
    variant: str = "nested",
    demands: str = "each",
    config_columns: Sequence[str] | None = None,
) -> NetworkModel:
    """MVA predictions for every configuration with a middleware (module docstring)."""
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {', '.join(VARIANTS)}, got {variant!r}")
    if demands not in DEMAND_SOURCES:
        raise ValueError(f"demands must be one of {', '.join(DEMAND_SOURCES)}, got {demands!r}")
    data = check_table(table).reset_index(drop=True)
    columns = list(config_columns) if config_columns is not None else config_columns_of(data)
    groups = population_groups(data, columns)

    demand_rows = []
    comparison_rows = []
    notes = []
    for index, row in data.iterrows():
        own = measured_demands(row)
        source = own
        if demands == "lowest":
            members = data.loc[groups == groups[index]]
            lowest = members.loc[members["clients"].astype(float).idxmin()]
            source = measured_demands(lowest)
            source = Demands(**{**source.__dict__, "population": own.population})
        # Links are centres of the solved network only when the demands come from another
        # population (module docstring, 7); the bounds always see them.
        every_center = build_centers(source, variant)
        centers = every_center if demands == "lowest" else build_centers(source, variant, links=False)
        population = source.population
        result = mva(centers, population, 0.0)
        bounds = asymptotic_bounds(every_center, 0.0, population)
        names = result.center_names
        at_n = population - 1

        def residence(name: str, n: int = at_n) -> float:
            return float(result.residence_time[n, names.index(name)])

        def utilization(name: str) -> float:
            return float(result.utilization[at_n, names.index(name)])

        x = float(result.throughput[at_n])
        workers_demand = centers[names.index("workers")].demand
        workers_residence = residence("workers")
        queue_wait = _clean(workers_residence - workers_demand)
        servers_predicted = source.servers if variant == "nested" else residence("servers")
        # Requests waiting for a worker as an arriving request sees them: population N - 1.
        if population > 1:
            x_before = float(result.throughput[population - 2])
            in_pool = float(result.queue_length[population - 2, names.index("workers")])
            waiting_seen = _clean(in_pool - x_before * workers_demand)
        else:
            waiting_seen = 0.0
        utilizations = {"net-thread": utilization("net-thread"), "workers": utilization("workers")}
        x_here = float(result.throughput[at_n])
        utilizations.update({name: utilization(name) if name in names else x_here * demand
                             for name, demand in source.links})
        middlewares = int(row["middlewares"])
        measured_net = (
            float(row["mw_net_ms"])
            if own.split_measured
            else max(float(row["mw_response_ms"]) - float(row["mw_queue_ms"]) - float(row["mw_service_ms"]), 0.0)
        )
        # The configuration and its demands, shared by both tables.
        config = {c: row[c] for c in columns}
        shared = {
            **config,
            "population": population,
            "net_thread_ms": source.net_thread / MS,
            "workers_own_ms": source.workers_own / MS,
            "servers_ms": source.servers / MS,
            "network_ms": source.network / MS,
            "workers_demand_ms": workers_demand / MS,
            **{f"{name}_ms": demand / MS for name, demand in source.links},
        }
        demand_rows.append(
            {**shared, "worker_threads": source.workers, "split_measured": source.split_measured}
        )
        comparison_rows.append(
            {
                **shared,
                "bottleneck": max(utilizations, key=utilizations.__getitem__),
                "bottleneck_utilization_predicted": max(utilizations.values()),
                "asymptotic_bottleneck": bounds.bottleneck,
                "knee_population": bounds.knee_population,
                "system_throughput_predicted": x * middlewares,
                "system_throughput_measured": float(row["throughput"]),
                "throughput_predicted": x,
                "throughput_measured": float(row["throughput"]) / middlewares,
                "net_thread_response_ms_predicted": residence("net-thread") / MS,
                "net_thread_response_ms_measured": measured_net,
                "queue_wait_ms_predicted": queue_wait / MS,
                "queue_wait_ms_measured": float(row["mw_queue_ms"]),
                "workers_own_ms_predicted": source.workers_own / MS,
                "workers_own_ms_measured": float(row["mw_worker_ms"]) if own.split_measured else math.nan,
                "servers_response_ms_predicted": servers_predicted / MS,
                "servers_response_ms_measured": float(row["mw_service_ms"]),
                "network_response_ms_predicted": residence("network") / MS,
                "network_response_ms_measured": own.network / MS,
                "response_ms_predicted": float(result.response_time[at_n]) / MS,
                "response_ms_measured": float(row["response_ms"]),
                "net_thread_utilization_predicted": utilizations["net-thread"],
                "net_thread_utilization_measured": math.nan,
                "workers_utilization_predicted": utilizations["workers"],
                "workers_utilization_measured": math.nan,
                "queue_length_predicted": waiting_seen,
                "queue_length_measured": float(row.get("mw_queue_length", math.nan)),
            }
        )
        if population * middlewares != int(row["clients"]):
            notes.append(
                f"{configuration_label(config)}: {int(row['clients'])} clients over {middlewares} middlewares "
                f"modelled as {population} per middleware"
            )
    if not any(d["split_measured"] for d in demand_rows):
        notes.append(
            "no per-request timestamps (request_log_sample): the net thread's demand is "
            "R_mw - T_queue - T_service and the workers' own time is taken as 0"
        )
    return NetworkModel(
        variant=variant,
        demands_from=demands,
        config_columns=tuple(columns),
        demands=pd.DataFrame(demand_rows),
        comparison=pd.DataFrame(comparison_rows),
        notes=tuple(notes),
    )


def _is_link_column(name: object) -> bool:
    """A link direction's demand column of `demands` and `comparison` (``link to H_ms``)."""
    return isinstance(name, str) and name.startswith("link ") and name.endswith("_ms")


def link_columns(frame: pd.DataFrame) -> list[str]:
    return [c for c in frame.columns if _is_link_column(c)]


def _clean(difference: float) -> float:
    """A difference that cannot be negative (seconds or jobs): rounding noise becomes 0."""
    return 0.0 if difference < 1e-12 else difference

