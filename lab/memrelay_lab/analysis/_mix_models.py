"""M/M/1 and M/M/m with the service rate of the read/write mix and m = backend servers
(seed 002 §1-2, Tables 1-2).

Per configuration with a middleware (pool engine), per middleware:

- λ: the middleware's measured throughput;
- E[s] per type: the time a request spends in the middleware after leaving the queue
  (response time − queue time, memrelay's per-type means), reads (gets and multi-gets,
  weighted by their counts) and sets apart;
- μ_mix = 1 / (p_read E[s]_read + p_set E[s]_set), the rate one worker serves the mix at
  (`theory.mix_service_rate`);
- the M/M/m model has m = backend servers, each served by its share of the worker threads
  (the seed's "active threads": the workers spread evenly over the servers), so
  μ = (workers / servers) μ_mix per server; the M/M/1 model is the whole middleware as one
  server of rate workers × μ_mix (seed 002 §1.1's normalisation).

Measured beside them: E[n] = memrelay's mean of requests inside it (sampled), E[n_q] = its mean
queue length, E[r] = its response time, E[w] = its queue time. ρ ≥ 1 has no steady state.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..theory import UnstableSystemError, mix_mm1, mix_mmm, mix_service_rate
from ._inputs import MS

__all__ = ["mix_models"]

_MEASURED = {"jobs_in_system": "mw_in_system", "jobs_in_queue": "mw_queue_length",
             "response_ms": "mw_response_ms", "waiting_ms": "mw_queue_ms"}


def _type_service_ms(row: pd.Series, kinds: Sequence[str]) -> tuple[float, float]:
    """(count-weighted mean of response − queue time over `kinds`, their throughput)."""
    total_time = total_rate = 0.0
    for kind in kinds:
        rate = float(row.get(f"mw_throughput_{kind}", math.nan))
        service = float(row.get(f"mw_response_{kind}_ms", math.nan)) - float(row.get(f"mw_queue_{kind}_ms", math.nan))
        if np.isfinite(rate) and rate > 0 and np.isfinite(service):
            total_time += rate * service
            total_rate += rate
    return (total_time / total_rate if total_rate else math.nan), total_rate


def mix_models(table: pd.DataFrame, config_columns: Sequence[str]) -> pd.DataFrame | None:
    """One row per configuration (module docstring); None when no configuration has what the
    model needs (a pool of workers and per-type middleware times)."""
    needed = {"mw_throughput_get", "mw_response_get_ms", "mw_queue_get_ms", "workers", "servers", "middlewares"}
    if not needed <= set(table.columns):
        return None
    rows = []
    for _, row in table.iterrows():
        middlewares, workers, servers = (float(row.get(c, 0) or 0) for c in ("middlewares", "workers", "servers"))
        if middlewares <= 0 or workers <= 0 or servers <= 0 or row.get("engine", "pool") != "pool":
            continue
        read_ms, read_rate = _type_service_ms(row, ("get", "multiget"))
        set_ms, set_rate = _type_service_ms(row, ("set",))
        if read_rate + set_rate <= 0:
            continue
        read_share = read_rate / (read_rate + set_rate)
        lam = float(row["mw_throughput"]) / middlewares
        m = int(servers)
        per_server = workers / servers

        def rates(scale: float) -> tuple[float, float]:
            """Per-type rates of `scale` requests served at once (a type that never ran gets
            any positive rate: its share is zero)."""
            return (scale / (read_ms * MS) if read_rate else 1.0, scale / (set_ms * MS) if set_rate else 1.0)

        mu_mix = mix_service_rate(read_share, *rates(1.0))
        record = {c: row[c] for c in config_columns if c in table}
        record.update({
            "arrival_rate": lam, "read_service_ms": read_ms, "set_service_ms": set_ms, "write_share": 1 - read_share,
            "mix_service_rate": mu_mix, "servers": m, "workers_per_server": per_server,
            "service_rate_per_server": per_server * mu_mix, "traffic_intensity": lam / (workers * mu_mix),
        })
        record.update(_model("mm1", lambda: mix_mm1(lam, read_share, *rates(workers))))
        record.update(_model("mmm", lambda: mix_mmm(lam, read_share, *rates(per_server), m)))
        for name, column in _MEASURED.items():
            value = float(row.get(column, math.nan))
            record[f"{name}_measured"] = value / middlewares if column == "mw_in_system" else value
        rows.append(record)
    return pd.DataFrame(rows) if rows else None


def _model(name: str, build) -> dict:
    """The model's probabilities and means (times in ms); NaN without a steady state."""
    try:
        result = build()
    except (UnstableSystemError, ValueError):
        result = None
    values = {
        "prob_zero_jobs": lambda r: r.prob_zero_jobs,
        "prob_queueing": lambda r: r.prob_queueing,
        "jobs_in_system": lambda r: r.mean_jobs_in_system,
        "jobs_in_queue": lambda r: r.mean_jobs_in_queue,
        "response_ms": lambda r: r.mean_response_time / MS,
        "waiting_ms": lambda r: r.mean_waiting_time / MS,
    }
    return {f"{key}_{name}": (get(result) if result is not None else math.nan) for key, get in values.items()}
