"""The configuration table the queueing models read, and its checks.

One row per configuration with the means over repetitions (a `ResultsSummary`'s
``pooled_table()``: times weighted by request count over the repetitions, so that they pair
with the mean throughput). Columns used (times in ms, rates per second):

    clients, middlewares, workers              the configuration
    throughput, response_ms                    measured on the clients (X, R_client)
    mw_throughput, mw_response_ms,             measured on the middlewares, combined
    mw_queue_ms, mw_service_ms, mw_queue_length
    mw_net_ms, mw_worker_ms                    optional (see `_network`, "split")
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..results import configuration_columns

__all__ = ["MS", "NetworkModelError", "check_table", "config_columns_of", "population_groups"]

MS = 1e-3

# Columns that identify the population, not the configuration group.
POPULATION_COLUMNS = (
    "clients",
    "clients_per_thread",
    "threads_per_instance",
    "instances_per_machine",
    "client_machines",
    "instances",
    "clients_per_instance",
)
REQUIRED = (
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



def check_table(table: pd.DataFrame) -> pd.DataFrame:
    missing = [c for c in REQUIRED if c not in table.columns]
    if missing:
        raise NetworkModelError(f"the configuration table lacks {', '.join(missing)}")
    with_middleware = table[pd.to_numeric(table["middlewares"], errors="coerce").fillna(0) > 0]
    if "engine" in with_middleware:
        # The models are of the pool engine (net thread, queue, worker pool); the evented
        # engine has no worker pool to model.
        with_middleware = with_middleware[with_middleware["engine"].fillna("pool") == "pool"]
    with_middleware = with_middleware.dropna(subset=list(REQUIRED))
    if with_middleware.empty:
        raise NetworkModelError(
            "no configuration with a pool-engine middleware and complete measurements to model"
        )
    return with_middleware


def config_columns_of(table: pd.DataFrame, exclude: Sequence[str] = ()) -> list[str]:
    """Configuration columns of a table without its manifest: `results._columns`' rule (the
    measures by name: ``loaders``, ``cpu_*``, ``link:*``, ``*_ms``, ...), and the summary's own
    bookkeeping (``configuration``, ``n``, ``label``, interval bounds) left out."""
    bookkeeping = ("configuration", "n", "config_id", "requests", "label")
    return [
        c for c in configuration_columns(table.columns)
        if c not in exclude and c not in bookkeeping and not c.endswith(("_low", "_high", "_n"))
    ]


def population_groups(data: pd.DataFrame, columns: Sequence[str]) -> np.ndarray:
    """Group number of each row: configurations equal in everything but the population."""
    keys = [c for c in columns if c not in POPULATION_COLUMNS]
    if not keys:
        return np.zeros(len(data), dtype=int)
    labels = data[keys].astype(str).agg("\x1f".join, axis=1)
    return pd.factorize(labels)[0]

