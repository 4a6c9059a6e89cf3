"""Queueing models built from what an experiment measured (seed 000 §7, seed 002 §3).

Input: a configuration table, one row per configuration with the means over repetitions
(``summarize(load(folder)).pooled_table()`` from `_summary`: times weighted by request
count over the repetitions, so that they pair with the mean throughput). Columns used
(times in ms, rates per second):

    clients, middlewares, workers              the configuration
    throughput, response_ms                    measured on the clients (X, R_client)
    mw_throughput, mw_response_ms,             measured on the middlewares, combined
    mw_queue_ms, mw_service_ms, mw_queue_length
    mw_net_ms, mw_worker_ms                    optional (see "split" below)

Two products: the MVA network of queues (`network_model`) and the single-queue M/M/1 and
M/M/m tables (`mm_tables`).

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
bottleneck is the center with the highest predicted utilization at N (seed 000 §7.4.2);
the asymptotic bottleneck (largest demand per server) and knee N* come with it.

## M/M/1 and M/M/m (seed 000 §7.1-7.3, Tables 22-31)

Per configuration and per middleware: arrival rate lambda = measured middleware
throughput / M. Service: ``service_rate="service-time"`` (default) takes as the service
time of a request everything the middleware spends on it outside the request queue,
S = R_mw - T_queue (so at light load the models reproduce R_mw); the M/M/m model has
m = workers and mu = 1 / S per worker, the M/M/1 model is the pool as one server of rate
m / S (the measured service time divided by the worker count). ``service_rate="peak"`` is
seed 000's rule: mu = the highest throughput measured in the configuration's group (per
middleware) for M/M/1, divided by m for M/M/m. Measured counterparts: response time R_mw,
waiting time T_queue, jobs in the queue = memrelay's mean queue length, jobs in the system
= lambda R_mw (Little's law).
A configuration with rho >= 1 has no steady state: its predicted metrics are NaN and
``stable`` is False.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ._jsonable import jsonable
from ._mva import Center, asymptotic_bounds, mva
from ._queueing import UnstableSystemError, mm1, mmm

__all__ = [
    "Demands",
    "MMTables",
    "NetworkModel",
    "NetworkModelError",
    "build_centers",
    "measured_demands",
    "mm_tables",
    "models_from_results",
    "network_model",
]

MS = 1e-3
VARIANTS = ("nested", "seed")
DEMAND_SOURCES = ("each", "lowest")
SERVICE_RATES = ("service-time", "peak")
MM_PERCENTILES = (90.0, 99.0)

# Columns that identify the population, not the configuration group.
_POPULATION_COLUMNS = (
    "clients",
    "clients_per_thread",
    "threads_per_instance",
    "instances_per_machine",
    "client_machines",
    "instances",
    "clients_per_instance",
)
_REQUIRED = (
    "clients",
    "middlewares",
    "workers",
    "throughput",
    "response_ms",
    "mw_response_ms",
    "mw_queue_ms",
    "mw_service_ms",
)


_DEMAND_COLUMNS = ("net_thread_ms", "workers_own_ms", "servers_ms", "network_ms", "workers_demand_ms")


class NetworkModelError(ValueError):
    """The table lacks what a model needs (no middleware, missing columns)."""


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

    def centers(self, variant: str = "nested") -> list[Center]:
        return build_centers(self, variant)


def build_centers(demands: Demands, variant: str = "nested") -> list[Center]:
    """The centers of one middleware's network (see the module docstring)."""
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {', '.join(VARIANTS)}, got {variant!r}")
    if variant == "nested":
        return [
            Center.queue("net-thread", demands.net_thread),
            Center.multi_server("workers", demands.workers_own + demands.servers, demands.workers),
            Center.delay("network", demands.network),
        ]
    return [
        Center.queue("net-thread", demands.net_thread),
        Center.multi_server("workers", demands.workers_own, demands.workers),
        Center.delay("servers", demands.servers),
        Center.delay("network", demands.network),
    ]


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
                        "configuration": {c: _plain(row[c]) for c in self.config_columns},
                        "demands_ms": {k: row[k] for k in _DEMAND_COLUMNS},
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


def _plain(value):
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, (np.bool_,)):
        return bool(value)
    return value


def _check_table(table: pd.DataFrame) -> pd.DataFrame:
    missing = [c for c in _REQUIRED if c not in table.columns]
    if missing:
        raise NetworkModelError(f"the configuration table lacks {', '.join(missing)}")
    with_middleware = table[pd.to_numeric(table["middlewares"], errors="coerce").fillna(0) > 0]
    if "engine" in with_middleware:
        # The models are of the pool engine (net thread, queue, worker pool); the evented
        # engine has no worker pool to model.
        with_middleware = with_middleware[with_middleware["engine"].fillna("pool") == "pool"]
    with_middleware = with_middleware.dropna(subset=list(_REQUIRED))
    if with_middleware.empty:
        raise NetworkModelError(
            "no configuration with a pool-engine middleware and complete measurements to model"
        )
    return with_middleware


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
    )


def config_columns_of(table: pd.DataFrame, exclude: Sequence[str] = ()) -> list[str]:
    """Configuration columns: those not produced by the summary (no measured suffixes)."""
    measured_prefixes = (
        "mw_", "throughput", "response", "keys_", "miss", "error", "network_ms", "count", "kept_s", "duration_s",
        "hits",
    )
    columns = []
    for column in table.columns:
        if column in exclude or column.startswith(measured_prefixes) or column.endswith(
            ("_half_width", "_low", "_high", "_n")
        ):
            continue
        if column in ("repetitions", "n", "config_id", "requests", "duration_s", "label"):
            continue
        columns.append(column)
    return columns


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
    data = _check_table(table).reset_index(drop=True)
    columns = list(config_columns) if config_columns is not None else config_columns_of(data)
    groups = _groups(data, columns)

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
        centers = build_centers(source, variant)
        population = source.population
        result = mva(centers, population, 0.0)
        bounds = asymptotic_bounds(centers, 0.0, population)
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
        middlewares = int(row["middlewares"])
        measured_net = (
            float(row["mw_net_ms"])
            if own.split_measured
            else max(float(row["mw_response_ms"]) - float(row["mw_queue_ms"]) - float(row["mw_service_ms"]), 0.0)
        )
        config = {c: row[c] for c in columns}
        demand_rows.append(
            {
                **config,
                "population": population,
                "net_thread_ms": source.net_thread / MS,
                "workers_own_ms": source.workers_own / MS,
                "servers_ms": source.servers / MS,
                "network_ms": source.network / MS,
                "workers_demand_ms": workers_demand / MS,
                "worker_threads": source.workers,
                "split_measured": source.split_measured,
            }
        )
        comparison_rows.append(
            {
                **config,
                "population": population,
                "net_thread_ms": source.net_thread / MS,
                "workers_own_ms": source.workers_own / MS,
                "servers_ms": source.servers / MS,
                "network_ms": source.network / MS,
                "workers_demand_ms": workers_demand / MS,
                "bottleneck": max(utilizations, key=utilizations.__getitem__),
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
                f"{_describe(config)}: {int(row['clients'])} clients over {middlewares} middlewares "
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


def _clean(difference: float) -> float:
    """A difference that cannot be negative (seconds or jobs): rounding noise becomes 0."""
    return 0.0 if difference < 1e-12 else difference


def _groups(data: pd.DataFrame, columns: Sequence[str]) -> np.ndarray:
    """Group number of each row: configurations equal in everything but the population."""
    keys = [c for c in columns if c not in _POPULATION_COLUMNS]
    if not keys:
        return np.zeros(len(data), dtype=int)
    labels = data[keys].astype(str).agg("\x1f".join, axis=1)
    return pd.factorize(labels)[0]


def _describe(config: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in config.items())


# ---------------------------------------------------------------- M/M/1 and M/M/m


@dataclass(frozen=True)
class MMTables:
    """M/M/1 and M/M/m results per configuration.

    `mm1` and `mmm`: long frames, one row per (configuration, metric) with the model value
    (seed 000 Tables 22-30 are these, pivoted with one column per configuration; `wide()`
    pivots). `comparison`: one row per configuration with predicted (M/M/1, M/M/m) and
    measured response time, waiting time, queue length and jobs in system (Table 31).
    Times in ms, rates per second, per middleware.
    """

    service_rate: str
    config_columns: tuple[str, ...]
    mm1: pd.DataFrame
    mmm: pd.DataFrame
    comparison: pd.DataFrame

    def wide(self, model: str = "mmm") -> pd.DataFrame:
        """Metrics as rows, configurations as columns (seed 000 Tables 22-30)."""
        frame = self.mm1 if model == "mm1" else self.mmm
        if frame.empty:
            return frame
        labels = frame[list(self.config_columns)].astype(str).agg(", ".join, axis=1) if self.config_columns else "all"
        pivot = frame.assign(configuration=labels).pivot_table(
            index="metric", columns="configuration", values="value", sort=False, aggfunc="first"
        )
        order = list(dict.fromkeys(frame["metric"]))
        return pivot.reindex(order)

    def to_dict(self) -> dict:
        return jsonable(
            {
                "service_rate": self.service_rate,
                "units": {"time": "ms", "rate": "requests per second"},
                "comparison": self.comparison.to_dict(orient="records"),
                "mm1": self.mm1.to_dict(orient="records"),
                "mmm": self.mmm.to_dict(orient="records"),
            }
        )


_MM_METRICS = (
    ("arrival_rate", "Arrival rate λ (req/s)", 1.0),
    ("service_rate", "Service rate μ (req/s, per server)", 1.0),
    ("servers", "Number of servers m", 1.0),
    ("traffic_intensity", "Traffic intensity ρ", 1.0),
    ("prob_zero_jobs", "Prob. of 0 jobs in system", 1.0),
    ("prob_queueing", "Prob. of queueing", 1.0),
    ("mean_jobs_in_system", "Mean # of jobs in system", 1.0),
    ("var_jobs_in_system", "Var. of # of jobs in system", 1.0),
    ("mean_jobs_in_queue", "Mean # of jobs in queue", 1.0),
    ("var_jobs_in_queue", "Var. of # of jobs in queue", 1.0),
    ("mean_response_time", "Mean response time (ms)", 1e3),
    ("var_response_time", "Var. of response time (ms²)", 1e6),
    ("mean_waiting_time", "Mean waiting time (ms)", 1e3),
    ("var_waiting_time", "Var. of waiting time (ms²)", 1e6),
)


def mm_tables(
    table: pd.DataFrame,
    *,
    service_rate: str = "service-time",
    config_columns: Sequence[str] | None = None,
) -> MMTables:
    """M/M/1 and M/M/m per configuration with a middleware (module docstring)."""
    if service_rate not in SERVICE_RATES:
        raise ValueError(f"service_rate must be one of {', '.join(SERVICE_RATES)}, got {service_rate!r}")
    data = _check_table(table).reset_index(drop=True)
    columns = list(config_columns) if config_columns is not None else config_columns_of(data)
    groups = _groups(data, columns)
    per_mw_throughput = data["mw_throughput"].astype(float) / data["middlewares"].astype(float) if (
        "mw_throughput" in data
    ) else data["throughput"].astype(float) / data["middlewares"].astype(float)
    peak = per_mw_throughput.groupby(groups).transform("max")

    mm1_rows, mmm_rows, comparison_rows = [], [], []
    for index, row in data.iterrows():
        config = {c: row[c] for c in columns}
        m = int(row["workers"])
        lam = float(per_mw_throughput.iloc[index])
        if service_rate == "peak":
            mu_one = float(peak.iloc[index])
            mu_worker = mu_one / m
        else:
            s = (float(row["mw_response_ms"]) - float(row["mw_queue_ms"])) * MS
            mu_worker = 1.0 / s if s > 0 else math.nan
            mu_one = m * mu_worker
        results = {}
        for model, build in (("mm1", lambda: mm1(lam, mu_one)), ("mmm", lambda: mmm(lam, mu_worker, m))):
            try:
                results[model] = build()
            except (UnstableSystemError, ValueError):
                results[model] = None
        for model, sink, mu, servers in (("mm1", mm1_rows, mu_one, 1), ("mmm", mmm_rows, mu_worker, m)):
            result = results[model]
            for key, label, scale in _MM_METRICS:
                if key == "arrival_rate":
                    value = lam
                elif key == "service_rate":
                    value = mu
                elif key == "servers":
                    value = servers
                elif key == "traffic_intensity":
                    value = lam / (servers * mu) if mu and np.isfinite(mu) else math.nan
                elif result is None:
                    value = math.nan
                else:
                    value = getattr(result, key) * scale
                sink.append({**config, "metric": label, "value": value})
            for q in MM_PERCENTILES:
                for kind, method in (("response", "response_time_percentile"), ("waiting", "waiting_time_percentile")):
                    value = getattr(result, method)(q) * 1e3 if result is not None else math.nan
                    sink.append({**config, "metric": f"{q:g}-percentile of {kind} time (ms)", "value": value})
            sink.append({**config, "metric": "Stable (ρ < 1)", "value": float(result is not None)})

        r_mw = float(row["mw_response_ms"])
        comparison = {
            **config,
            "arrival_rate": lam,
            "service_rate_per_worker": mu_worker,
            "workers": m,
            "traffic_intensity": lam / (m * mu_worker) if mu_worker and np.isfinite(mu_worker) else math.nan,
            "stable": results["mmm"] is not None,
        }
        for model in ("mm1", "mmm"):
            result = results[model]
            comparison[f"response_ms_{model}"] = result.mean_response_time * 1e3 if result else math.nan
            comparison[f"waiting_time_ms_{model}"] = result.mean_waiting_time * 1e3 if result else math.nan
            comparison[f"queue_length_{model}"] = result.mean_jobs_in_queue if result else math.nan
            comparison[f"jobs_in_system_{model}"] = result.mean_jobs_in_system if result else math.nan
        comparison["response_ms_measured"] = r_mw
        comparison["waiting_time_ms_measured"] = float(row["mw_queue_ms"])
        comparison["queue_length_measured"] = float(row.get("mw_queue_length", math.nan))
        comparison["jobs_in_system_measured"] = lam * r_mw * MS
        comparison_rows.append(comparison)
    return MMTables(
        service_rate=service_rate,
        config_columns=tuple(columns),
        mm1=pd.DataFrame(mm1_rows),
        mmm=pd.DataFrame(mmm_rows),
        comparison=pd.DataFrame(comparison_rows),
    )


def models_from_results(
    results_dir,
    *,
    variant: str = "nested",
    demands: str = "each",
    service_rate: str = "service-time",
    level: float = 0.95,
) -> tuple[NetworkModel, MMTables]:
    """Load a results folder and build both models for its configurations with a middleware."""
    from ._load import load
    from ._summary import summarize

    summary = summarize(load(results_dir), level)
    columns = summary.display_columns
    for needed in ("clients", "middlewares", "workers"):
        if needed not in columns:
            columns = [*columns, needed]
    table = summary.pooled_table()
    return (
        network_model(table, variant=variant, demands=demands, config_columns=columns),
        mm_tables(table, service_rate=service_rate, config_columns=columns),
    )
