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

7. **Links** (issues 22, 33, 34; `_links` says why). Each host link whose rate is known and
   whose bytes were counted is one link of the request's path, with D = bytes per request x 8 /
   rate of its busier direction. The path's links together are one queue (one server), the
   busiest link's, named after it: shaped links in series pass requests as their slowest alone
   would (Friedman's reduction of tandem queues), and a tbf delays nothing below its rate. A
   queue per link instead added every link's transmission time to each cycle: with every testbed
   host shaped, 48% too low at 2 clients. A link carries the traffic of every middleware while
   each network here is one middleware's, so its demand per request of one middleware's network
   is M x D. The other links are no centre; their utilization is X x D. The path's queue is a
   centre at every load and in both ways of taking the demands.

8. **Calibration** (issue 33). The measured times already hold the links' passage: the
   servers' time the replies crossing the server's and the middleware's links, the network
   delay the clients'. With a link in the network they would be counted twice (a link-bound
   design's 2-client configuration came out 57% low). So where the network has links, the
   servers' time and the network delay of the configuration the demands come from are scaled
   by one factor f in [0, 1], solved (a one-dimensional root) so that the model gives that
   configuration's measured throughput: the calibration configuration is reproduced by the
   model it calibrated, and the part f of those delays that is not the links' is what the
   other populations get. f = 1 when the model is not slower than measured with them whole
   (the links hold nothing); f = 0 and a note when it is slower even without them. Nothing
   is fitted to any other configuration's throughput.

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
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd
from scipy.optimize import brentq

from .._values import configuration_label, jsonable, plain
from ..theory import Center, asymptotic_bounds, mva

from ._inputs import MS, check_table, config_columns_of, population_groups
from ._links import link_demands, link_utilizations, path_queue

__all__ = ["Demands", "NetworkModel", "build_centers", "calibrated_off_link", "link_columns", "measured_demands", "network_model"]

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
    #: (link name, demand in seconds per request of this middleware's network) per link whose
    #: rate and bytes are known; the busiest is the path's queue (module docstring, 7).
    links: tuple[tuple[str, float], ...] = ()
    #: The part of the servers' time and the network delay that is not the links' (module
    #: docstring, 8); 1 without links.
    off_link: float = 1.0

    def centers(self, variant: str = "nested") -> list[Center]:
        return build_centers(self, variant)


def build_centers(demands: Demands, variant: str = "nested", links: bool = True) -> list[Center]:
    """The centers of one middleware's network (see the module docstring); ``links=False``
    leaves the path's queue out."""
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {', '.join(VARIANTS)}, got {variant!r}")
    path = path_queue(demands.links) if links else None
    links = [Center.queue(*path)] if path else []
    servers, network = demands.servers * demands.off_link, demands.network * demands.off_link
    if variant == "nested":
        return [
            Center.queue("net-thread", demands.net_thread),
            Center.multi_server("workers", demands.workers_own + servers, demands.workers),
            Center.delay("network", network),
            *links,
        ]
    return [
        Center.queue("net-thread", demands.net_thread),
        Center.multi_server("workers", demands.workers_own, demands.workers),
        Center.delay("servers", servers),
        Center.delay("network", network),
        *links,
    ]


def calibrated_off_link(demands: Demands, throughput: float, variant: str = "nested") -> float:
    """The factor f of the module docstring (8): the model with the servers' time and the
    network delay scaled by f gives `throughput` (per middleware) at the demands' population."""
    if not demands.links or not (math.isfinite(throughput) and throughput > 0):
        return 1.0

    def gap(f: float) -> float:
        centers = build_centers(replace(demands, off_link=f), variant)
        return float(mva(centers, demands.population, 0.0).throughput[-1]) - throughput

    if gap(1.0) >= 0:
        return 1.0
    if gap(0.0) <= 0:
        return 0.0
    return float(brentq(gap, 0.0, 1.0, xtol=1e-9))


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
        calibration = row
        if demands == "lowest":
            members = data.loc[groups == groups[index]]
            calibration = members.loc[members["clients"].astype(float).idxmin()]
        source = measured_demands(calibration)
        # The links' passage taken out of the delays that hold it (module docstring, 8), at the
        # configuration the demands come from.
        off_link = calibrated_off_link(source, float(calibration["throughput"]) / int(calibration["middlewares"]),
                                       variant)
        source = replace(source, population=own.population, off_link=off_link)
        if off_link == 0.0:
            notes.append(f"{configuration_label({c: calibration[c] for c in columns})}: the model is slower than "
                         "measured even with no servers' time and no network delay beside its links")
        every_center = centers = build_centers(source, variant)
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
        servers_predicted = source.servers * source.off_link if variant == "nested" else residence("servers")
        # Requests waiting for a worker as an arriving request sees them: population N - 1.
        if population > 1:
            x_before = float(result.throughput[population - 2])
            in_pool = float(result.queue_length[population - 2, names.index("workers")])
            waiting_seen = _clean(in_pool - x_before * workers_demand)
        else:
            waiting_seen = 0.0
        utilizations = {"net-thread": utilization("net-thread"), "workers": utilization("workers")}
        # Every link's, the path's queue among them, by the utilization law (module docstring, 7).
        utilizations.update(link_utilizations(x, source.links))
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
            "servers_ms": source.servers * source.off_link / MS,
            "network_ms": source.network * source.off_link / MS,
            "workers_demand_ms": workers_demand / MS,
            **{f"{name}_ms": demand / MS for name, demand in source.links},
        }
        demand_rows.append(
            {**shared, "worker_threads": source.workers, "split_measured": source.split_measured,
             **({"off_link_part": source.off_link} if source.links else {})}
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

