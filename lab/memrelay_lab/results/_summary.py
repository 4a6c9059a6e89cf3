"""Statistics over repetitions: one row per configuration, from a loaded results folder.

`summarize(results, level)` turns `load()`'s tidy rows into:

- ``runs``: one row per run (repetition), the clients' measures under their own names
  (``throughput``, ``response_ms``, ...) and the middlewares' (all middlewares combined as
  `load()` combines them: throughputs summed, times weighted by request count) prefixed
  ``mw_``; plus ``mw_other_ms`` = response - queue - service time (memrelay's own time
  outside the queue and the servers: net thread, routing, reply) and ``network_ms`` =
  client-side minus middleware-side response time (the network both ways and the
  clients' own time, seed 000 §7.4). Baselines without middleware have no ``mw_`` values.
- ``table``: one row per configuration, every measure as the mean over repetitions with
  ``<measure>_half_width``, the half width of its Student-t confidence interval at
  ``level`` (n - 1 degrees of freedom; NaN with one repetition), and ``repetitions``.
  Throughputs are the clients' sums (all bench instances), so their mean over repetitions
  is the mean total throughput.
  Mean times also come as ``<time>_weighted``: weighted by each repetition's request
  count, the mean over the pooled requests; `pooled_table()` puts them in place of the
  plain means, for the interactive law and the queueing models, which pair times with the
  mean throughput.
- ``percentiles``: one row per configuration and side (``clients``, ``middleware``) with
  the mean and percentiles read from the histograms of every repetition merged
  (`_histograms`), never averaged across runs, and the request count behind them.

``swept`` names the design parameters that take several values (workers moving with the
servers as S x T, the seeds' per-server pools, count as the servers alone); ``x`` is what the plots
put on the horizontal axis (clients when the population varies, else the multi-get size,
the worker count, or the first swept parameter) and ``series`` the other swept
parameters, one line per combination.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .._values import configuration_label
from ..experiment import PARAMETERS
from ..theory import mean_confidence_interval
from ._columns import IDENTITY, configuration_columns
from ._histograms import PERCENTILES, merged_buckets, merged_client_hdr, percentile_columns
from ._links import LINK_MIN_INTERVAL_S, LINK_MIN_REQUESTS_PER_CLIENT
from ._request_log import request_log

__all__ = ["POPULATION", "ResultsSummary", "summarize"]

POPULATION = ("client_machines", "instances_per_machine", "threads_per_instance", "clients_per_thread")
CLIENT_MEASURES = (
    "throughput",
    "throughput_get",
    "throughput_multiget",
    "throughput_set",
    "keys_throughput",
    "response_ms",
    "response_get_ms",
    "response_multiget_ms",
    "response_set_ms",
    "response_p50_ms",
    "response_p90_ms",
    "response_p99_ms",
    "response_p999_ms",
    "miss_rate",
    "keys_per_request",
    "error_rate",
    "response_std_ms",
)
MIDDLEWARE_MEASURES = (
    "throughput",
    "keys_throughput",
    "response_ms",
    "queue_ms",
    "service_ms",
    "queue_length",
    "in_system",
    "miss_rate",
    "error_rate",
    "response_std_ms",
    "throughput_get",
    "throughput_multiget",
    "throughput_set",
    "response_get_ms",
    "response_multiget_ms",
    "response_set_ms",
    "queue_get_ms",
    "queue_multiget_ms",
    "queue_set_ms",
)
DERIVED = ("mw_other_ms", "network_ms")
# How the load generators ran (measures: `_columns`).
LOADER_MEASURES = ("loaders", "loaders_start_spread_s", "loaders_overlap")


@dataclass
class ResultsSummary:
    """A results folder reduced to configurations (see the module docstring)."""

    results: object
    level: float
    config_columns: list[str]
    swept: list[str]
    x: str | None
    series: list[str]
    runs: pd.DataFrame
    table: pd.DataFrame
    percentiles: pd.DataFrame
    notes: list[str] = field(default_factory=list)

    @property
    def measures(self) -> list[str]:
        return [c for c in self.runs.columns if c not in self.config_columns and c not in IDENTITY]

    def run_ids(self, configuration: int) -> list[str]:
        return list(self.runs.loc[self.runs["configuration"] == configuration, "run_id"])

    def label(self, row: pd.Series | dict, columns: Sequence[str] | None = None) -> str:
        """Short description of a configuration by its swept parameters."""
        columns = list(columns) if columns is not None else self.display_columns
        return configuration_label(row, columns)

    def pooled_table(self) -> pd.DataFrame:
        """`table` with every mean time replaced by its request-weighted mean over the
        repetitions (total time over total requests, the ``*_weighted`` columns).

        The per-repetition mean of a response time is what the confidence interval is
        about; but paired with the mean throughput in a law of the closed loop (N = X R,
        Little's law in the models), the response time must be averaged over the same
        requests the throughput counts. When repetitions differ (a busy machine), the plain
        mean of R times the mean of X is not N; the request-weighted R is.
        """
        table = self.table.copy()
        for column in table.columns:
            if column.endswith("_weighted"):
                table[column[: -len("_weighted")]] = table[column]
        return table

    @property
    def display_columns(self) -> list[str]:
        """The columns that tell configurations apart (clients instead of its factors)."""
        columns = [c for c in self.swept if c not in POPULATION]
        if any(c in POPULATION for c in self.swept) or self.x == "clients":
            columns = ["clients", *columns]
        return columns


def summarize(results, level: float = 0.95) -> ResultsSummary:
    """Configuration table, per-run wide table and merged-histogram percentiles."""
    frame = results.runs
    if frame is None or frame.empty:
        raise ValueError(f"{results.path}: no completed run to report on")
    # Which columns are parameters is `_columns`' rule: measured ones (loaders, ...) never are.
    config_columns = configuration_columns(frame.columns, getattr(results, "manifest", None))
    runs = _wide_runs(frame, config_columns, results)
    swept = _swept(runs)
    x, series = _axes(runs, swept)
    table = _table(runs, config_columns, level)
    percentiles = _percentiles(results, runs, config_columns)
    notes = []
    empty = table[~np.isfinite(table["throughput"].to_numpy(dtype=float))]
    if len(empty):
        notes.append(
            f"{len(empty)} of {len(table)} configurations have no measurement window left after trimming warm-up "
            "and cool-down (test_time too short for them): they are left out of the analyses"
        )
    if "link:too_short" in runs and (runs["link:too_short"] == 1).any():
        short = runs[runs["link:too_short"] == 1]
        notes.append(
            f"{len(short)} of {len(runs)} runs counted the bytes through their links over too short an interval "
            f"({short['link:interval_s'].min():.2f} s at the shortest; at least {LINK_MIN_INTERVAL_S:g} s and "
            f"{LINK_MIN_REQUESTS_PER_CLIENT} requests per client are needed): no bytes per request and no link "
            "demand from them; lengthen test_time"
        )
    if "kept_s" in runs and (runs["kept_s"] < 2).any():
        notes.append(
            "some runs kept less than 2 s after trimming warm-up and cool-down: their means come from very few windows"
        )
    return ResultsSummary(
        results=results,
        level=level,
        config_columns=config_columns,
        swept=swept,
        x=x,
        series=series,
        runs=runs,
        table=table,
        percentiles=percentiles,
        notes=notes,
    )


def _wide_runs(frame: pd.DataFrame, config_columns: list[str], results=None) -> pd.DataFrame:
    keys = ["run_id", "configuration", "repetition"]
    clients = frame[frame["source"] == "clients"]
    wide = clients[keys + config_columns].copy()
    cpu = [c for c in clients.columns if c.startswith(("cpu_", "link:")) or c == "cores"]
    for column in (*CLIENT_MEASURES, "count", "errors", "kept_s", "duration_s", *LOADER_MEASURES, *cpu):
        if column in clients:
            wide[column] = clients[column].to_numpy(dtype=float)
    wide = wide.set_index("run_id")
    middleware = frame[frame["source"] == "middleware"].set_index("run_id")
    for column in (*MIDDLEWARE_MEASURES, "count", "duration_s"):
        if column in middleware:
            wide[f"mw_{column}"] = middleware[column].astype(float).reindex(wide.index)
        else:
            wide[f"mw_{column}"] = math.nan
    wide["mw_other_ms"] = (wide["mw_response_ms"] - wide["mw_queue_ms"] - wide["mw_service_ms"]).clip(lower=0)
    if results is not None:
        split = {run_id: _request_log_split(results, run_id) for run_id in wide.index}
        if any(value is not None for value in split.values()):
            wide["mw_net_ms"] = [split[r][0] if split[r] else math.nan for r in wide.index]
            wide["mw_worker_ms"] = [split[r][1] if split[r] else math.nan for r in wide.index]
    wide["network_ms"] = wide["response_ms"] - wide["mw_response_ms"]
    return wide.reset_index()


def _request_log_split(results, run_id: str) -> tuple[float, float] | None:
    """Mean net-thread time (arrival -> enqueue) and worker's own time (dequeue -> first send
    plus last reply -> reply written), in ms, over the requests the middlewares logged
    (``request_log_sample``) inside the trimmed interval; None without a request log."""
    kept = request_log(results, run_id)
    if kept.empty:
        return None
    net = (kept["enqueue_us"] - kept["arrival_us"]).mean()
    worker = ((kept["first_send_us"] - kept["dequeue_us"]) + (kept["reply_written_us"] - kept["last_reply_us"])).mean()
    return float(net) / 1e3, float(worker) / 1e3


def _swept(runs: pd.DataFrame) -> list[str]:
    by_configuration = runs.drop_duplicates("configuration")
    swept = [
        p
        for p in PARAMETERS
        if p in by_configuration and by_configuration[p].astype(str).nunique(dropna=False) > 1
    ]
    if "servers" in swept and "workers" in swept and _workers_per_server_fixed(by_configuration):
        swept.remove("workers")
    return swept


def _workers_per_server_fixed(by_configuration: pd.DataFrame) -> bool:
    """Workers = S x T with one T: the seeds' per-server read pools (001/002, experiments/README.md),
    the pool moving with the servers; the design's parameter is the servers, not the workers."""
    workers = pd.to_numeric(by_configuration["workers"], errors="coerce")
    servers = pd.to_numeric(by_configuration["servers"], errors="coerce")
    ratio = workers / servers
    return bool(ratio.notna().all() and ratio.nunique() == 1)


def _axes(runs: pd.DataFrame, swept: list[str]) -> tuple[str | None, list[str]]:
    population_varies = runs["clients"].nunique() > 1 if "clients" in runs else False
    others = [p for p in swept if p not in POPULATION]
    if population_varies:
        return "clients", others
    for candidate in ("multiget", "workers"):
        if candidate in others:
            return candidate, [p for p in others if p != candidate]
    if others:
        return others[0], others[1:]
    return None, []


def _table(runs: pd.DataFrame, config_columns: list[str], level: float) -> pd.DataFrame:
    identity = ("run_id", "configuration", "repetition")
    measures = [c for c in runs.columns if c not in config_columns and c not in identity]
    records = []
    for configuration, group in runs.groupby("configuration", sort=True):
        record: dict[str, object] = {"configuration": configuration}
        record.update({c: group[c].iloc[0] for c in config_columns})
        record["repetitions"] = len(group)
        for column in measures:
            values = group[column].to_numpy(dtype=float)
            values = values[np.isfinite(values)]
            if values.size == 0:
                record[column], record[f"{column}_half_width"] = math.nan, math.nan
                continue
            interval = mean_confidence_interval(values, level)
            record[column] = interval.mean
            record[f"{column}_half_width"] = interval.half_width
        for column in _weighted_columns(measures):
            weights = group["mw_count" if column.startswith("mw_") else "count"].to_numpy(dtype=float)
            values = group[column].to_numpy(dtype=float)
            used = np.isfinite(values) & np.isfinite(weights) & (weights > 0)
            record[f"{column}_weighted"] = (
                float(np.dot(values[used], weights[used]) / weights[used].sum()) if used.any() else math.nan
            )
        records.append(record)
    return pd.DataFrame.from_records(records)


def _weighted_columns(measures: Sequence[str]) -> list[str]:
    """Mean times per request: those worth a request-weighted mean over repetitions."""
    return [c for c in measures if c.endswith("_ms") and not re.search(r"_p\d+_ms$", c)]


def _percentiles(results, runs: pd.DataFrame, config_columns: list[str]) -> pd.DataFrame:
    names = percentile_columns(PERCENTILES)
    records = []
    for configuration, group in runs.groupby("configuration", sort=True):
        run_ids = list(group["run_id"])
        config = {"configuration": configuration, **{c: group[c].iloc[0] for c in config_columns}}
        client = merged_client_hdr(results, run_ids)
        if client is not None and client.total:
            record = {**config, "side": "clients", "requests": client.total, "mean_ms": client.mean() / 1e3}
            record.update({name: client.value_at_quantile(q / 100.0) / 1e3 for q, name in names.items()})
            records.append(record)
        if group["mw_response_ms"].notna().any():
            middleware = merged_buckets(results, run_ids, "middleware")
            if middleware:
                record = {**config, "side": "middleware", "requests": middleware.total}
                record["mean_ms"] = middleware.mean() / 1e3
                record.update({name: middleware.percentile(q) / 1e3 for q, name in names.items()})
                records.append(record)
    return pd.DataFrame.from_records(records)
