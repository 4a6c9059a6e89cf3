"""M/M/1 and M/M/m tables per configuration, from what an experiment measured (seed 000 §7.1-7.3, Tables 22-31).

Input: the configuration table of `_inputs`.

Per configuration. ``service_rate="service-time"`` (default), per middleware: arrival rate
lambda = measured middleware throughput / M; the service time of a request is everything the
middleware spends on it outside the request queue, S = R_mw - T_queue (so at light load the
models reproduce R_mw); the M/M/m model has m = workers and mu = 1 / S per worker, the M/M/1
model is the pool as one server of rate m / S. ``service_rate="peak"`` is seed 000's rule
(§7.1-7.2, Tables 22-30), with the seed's inputs: lambda = the TOTAL measured throughput of
the system (all middlewares: the seed's lambda = 6,854 ops/s of two middlewares), mu = the
highest throughput observed in the configuration's group (same parameters but the clients;
the seed's 7,021) for M/M/1, mu / m per worker with m = worker threads for M/M/m. "Observed"
is the highest single repetition when the table carries ``mw_throughput_max`` (the report
adds it), so the configuration that set the peak has rho just below 1, as in the seed's
tables, where no column reaches its mu; without it, the highest mean (rho = 1 there).
Measured counterparts: response time R_mw,
waiting time T_queue, jobs in the queue = memrelay's mean queue length, jobs in the system
= lambda R_mw (Little's law), variance of the response time = the variance of single
response times in the middlewares' HdrHistograms (kept windows; seed 000 Table 31). The model
tables carry P(≥ 5) and P(≥ 10) jobs in the system (seed 000 Tables 22-26).
A configuration with rho >= 1 has no steady state: its predicted metrics are NaN and
``stable`` is False.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .._values import configuration_label, jsonable
from ..theory import UnstableSystemError, mm1, mmm
from ._inputs import MS, check_table, config_columns_of, population_groups

__all__ = ["MMTables", "mm_tables"]

SERVICE_RATES = ("service-time", "peak")
MM_PERCENTILES = (90.0, 99.0)

@dataclass(frozen=True)
class MMTables:
    """M/M/1 and M/M/m results per configuration.

    `mm1` and `mmm`: long frames, one row per (configuration, metric) with the model value
    (seed 000 Tables 22-30 are these, pivoted with one column per configuration; `wide()`
    pivots). `comparison`: one row per configuration with predicted (M/M/1, M/M/m) and
    measured response time, waiting time, queue length and jobs in system (Table 31).
    Times in ms, rates per second: per middleware with the service-time rule, of the whole
    system with the peak rule (seed 000's).
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
        labels = [configuration_label(row, self.config_columns, empty="all") for _, row in frame.iterrows()]
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
    ("prob_at_least_5", "Prob. of ≥ 5 jobs in system", 1.0),
    ("prob_at_least_10", "Prob. of ≥ 10 jobs in system", 1.0),
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
    data = check_table(table).reset_index(drop=True)
    columns = list(config_columns) if config_columns is not None else config_columns_of(data)
    groups = population_groups(data, columns)
    total_throughput = (data["mw_throughput"] if "mw_throughput" in data else data["throughput"]).astype(float)
    per_mw_throughput = total_throughput / data["middlewares"].astype(float)
    observed = data["mw_throughput_max"].astype(float) if "mw_throughput_max" in data else total_throughput
    peak = observed.fillna(total_throughput).groupby(groups).transform("max")

    mm1_rows, mmm_rows, comparison_rows = [], [], []
    for index, row in data.iterrows():
        config = {c: row[c] for c in columns}
        m = int(row["workers"])
        if service_rate == "peak":
            lam = float(total_throughput.iloc[index])
            mu_one = float(peak.iloc[index])
            mu_worker = mu_one / m
        else:
            lam = float(per_mw_throughput.iloc[index])
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
                elif key.startswith("prob_at_least_"):
                    value = result.prob_at_least_jobs(int(key.rsplit("_", 1)[1]))
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
            comparison[f"var_response_ms2_{model}"] = result.var_response_time * 1e6 if result else math.nan
        comparison["response_ms_measured"] = r_mw
        comparison["waiting_time_ms_measured"] = float(row["mw_queue_ms"])
        # memrelay's mean queue length is per middleware (the mean over them); the peak rule's
        # models are of the whole system, so its measured counterpart is the sum.
        whole = float(row["middlewares"]) if service_rate == "peak" else 1.0
        comparison["queue_length_measured"] = float(row.get("mw_queue_length", math.nan)) * whole
        comparison["jobs_in_system_measured"] = lam * r_mw * MS
        # The variance of single response times, from the middlewares' HdrHistograms.
        comparison["var_response_ms2_measured"] = float(row.get("mw_response_std_ms", math.nan)) ** 2
        comparison_rows.append(comparison)
    return MMTables(
        service_rate=service_rate,
        config_columns=tuple(columns),
        mm1=pd.DataFrame(mm1_rows),
        mmm=pd.DataFrame(mmm_rows),
        comparison=pd.DataFrame(comparison_rows),
    )

