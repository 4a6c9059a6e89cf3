"""Predictions, not fits: service demands calibrated on some configurations predict the others
(issue "models that predict"; seed 000 §7 builds its models from what was measured).

## The model of one configuration

The processors are the centre everything shares on one machine: memrelay-bench, memrelay and
memcached run on the same m cores (`cores`, measured). A request's cycle is a chain of stages
(`theory.shared_cpu_network`), each a pool of threads holding the request while it uses the
processors (its demand: measured processor time per request, D = U / X, the utilization law)
and, off them, waits:

- pool engine: the clients (memrelay-bench's threads), the net thread (one thread: memrelay's
  main thread and its helpers), the workers (W threads, holding the request through their own
  processor time, memcached's, and the off-processor wait z of the exchange);
- evented engine: the clients, the event loops (one per usable core: memrelay's default), and
  memcached with the wait z;
- no middleware: the clients, and memcached with the wait z;
- another proxy (``middleware = "twemproxy" | "memcached-proxy"``, measured from outside: its
  demand is its process's processor time per request): the clients, the proxy's threads (one
  event loop per twemproxy; memcached's proxy one worker thread per usable core, as the lab
  starts it), and memcached with the wait z.

Links (issues 33, 34): every host link whose rate is known and whose bytes were counted over a
long enough interval is on the request's path, with demand bytes per request x 8 / rate of its
busier direction. The path's links together are one stage beside the others, one thread (a link
sends one frame at a time) holding each request for the busiest link's demand, off the
processors, named after that link (`_links` says why: shaped links in series pass requests as
their slowest alone would, and a tbf delays nothing below its rate; a stage per link added their
transmission times up, 48% too low at 2 clients with every testbed host shaped). The other
links' utilization is X x D. A link's demand is measured, never solved for; it is interpolated
like the processor demands.

With links the wait z is split: a pool worker holds at most the time the middleware measured
it wait for the servers (T_service less memcached's processor time; the replies' passage over
the links is in it); the rest of z is a delay outside every pool (``network``: the clients'
side of the links, loopback). Without that bound, a link near saturation at a calibration
configuration (the testbed's tbf lets through some 96% of rate / bytes) had z grow until the
workers looked saturated and were named the bottleneck. And where a link is saturated in the
model already without any wait (utilization 0.9 or more), the throughput says nothing about z
(it is the link's rate whatever z is: the testbed's tbf passes some 96% of rate / bytes, and
the wait that would make up those 4% would have to be tens of milliseconds): z is taken as 0
there, and the model predicts that configuration to the link's accuracy rather than
reproducing it. Saturated means in the measurement too (its throughput x the link's demand):
with the path's links one stage, one client's cycle can be mostly that stage, busy 90% in the
model without any wait, while the measured throughput is well below the link's rate.

z, the time a request spends off every processor (loopback, wake-ups), is not measured
directly: at each calibration configuration it is solved for so that the model gives the
measured throughput (a one-dimensional root; zero when the model is already slower).

## Calibration and prediction

Configurations are grouped by every parameter except the population (clients and its factors)
and the thread counts (workers: a thread count changes a stage's threads, not the processor
time a request costs). Within a group the demands and z of the calibration configurations are
interpolated (constant beyond the ends) along 1/N for the pool engine and 1/sqrt(N) for the
evented one (`_load_axis` says why), and z linearly in N, to every other
configuration, which the model then predicts: along its own thread count when that was
calibrated at two populations (z, the wait a pool holds, differs with the pool's size: 38 µs
with 4 workers, 163 µs with 32 on `make demo` at 32 clients), else averaged over the thread
counts that were. The wait is interpolated along min(N, W), the requests a pool of W workers
holds at once, not along N (`_interpolate` says why). Default calibration: the lowest and the
highest population of each group. A prediction inside the measurement's own confidence interval counts as exact (noise is
not model error).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.optimize import brentq

from .._values import configuration_label, plain
from ..theory import SharedCpuResult, Stage, shared_cpu_network
from ._inputs import POPULATION_COLUMNS
from ._links import busier_directions, is_link, link_demands, link_utilizations, path_queue

__all__ = ["Prediction", "named_bottlenecks", "predict_configurations", "predictions_frame", "stages_of"]

THREAD_COLUMNS = ("workers", "threads")
# The threads of one proxy measured from outside, given the usable cores (`experiment._proxies`).
PROXY_THREADS = {"twemproxy": lambda cores: 1, "memcached-proxy": lambda cores: cores}
# Not a parameter: which `combinations` entry of the experiment file a configuration came from.
DESIGN_COLUMNS = ("block",)
_DEMANDS = ("cpu_bench_us", "cpu_net_us", "cpu_other_us", "cpu_worker_us", "cpu_loop_us", "cpu_memcached_us",
            "cpu_proxy_us")
# The most of the off-processor wait a worker holds, in µs: the servers' time the middleware
# measured, less memcached's processor time (module docstring, links).
WAIT_CAP = "wait_in_pool_max_us"
# A latency-bound configuration: no resource is this busy at the population measured.
LATENCY_BOUND = 0.5


@dataclass(frozen=True)
class Prediction:
    """One configuration: its parameters, whether it calibrated the model, what the model
    predicts and what was measured."""

    parameters: dict
    calibration: bool
    predicted: dict
    measured: dict

    def error(self, measure: str) -> float:
        """Relative error of the prediction; 0 when it falls inside the measured interval."""
        predicted, measured = self.predicted[measure], self.measured[measure]
        half_width = self.measured.get(f"{measure}_half_width", math.nan)
        if math.isfinite(half_width) and abs(predicted - measured) <= half_width:
            return 0.0
        return predicted / measured - 1 if measured else math.nan

    def to_dict(self) -> dict:
        return {
            "parameters": self.parameters,
            "calibration": self.calibration,
            "predicted": self.predicted,
            "measured": self.measured,
        }


def stages_of(row: pd.Series | dict, demands: dict[str, float], off_cpu_s: float) -> list[Stage]:
    """The stages of one configuration (module docstring), demands in µs per request."""
    us = lambda name: max(float(demands.get(name, 0.0) or 0.0), 0.0) * 1e-6  # noqa: E731
    outside_s = 0.0
    if WAIT_CAP in demands:  # a network with links: the wait a pool holds is bounded (module docstring)
        outside_s = max(off_cpu_s - us(WAIT_CAP), 0.0)
        off_cpu_s -= outside_s
    bench_threads = int(row.get("instances", 1)) * int(row.get("threads_per_instance", 1))
    stages = [Stage("clients", us("cpu_bench_us") or 1e-9, threads=max(bench_threads, 1))]
    middlewares = int(row.get("middlewares", 0) or 0)
    program = row.get("middleware") or "memrelay"
    if middlewares == 0:
        stages.append(Stage("memcached", us("cpu_memcached_us"), off_cpu_s))
    elif program in PROXY_THREADS:
        threads = PROXY_THREADS[program](int(row.get("cores", 1) or 1)) * middlewares
        stages.append(Stage(program, us("cpu_proxy_us") or 1e-9, threads=threads))
        stages.append(Stage("memcached", us("cpu_memcached_us"), off_cpu_s))
    elif row.get("engine") == "evented":
        loops = int(row.get("cores", 1) or 1) * middlewares
        stages.append(Stage("event loops", us("cpu_loop_us") + us("cpu_net_us") + us("cpu_other_us") or 1e-9,
                            threads=loops))
        stages.append(Stage("memcached", us("cpu_memcached_us"), off_cpu_s))
    else:
        stages.append(Stage("net thread", us("cpu_net_us") + us("cpu_other_us") or 1e-9, threads=middlewares))
        workers = int(row["workers"]) * middlewares
        stages.append(Stage("workers", us("cpu_worker_us") + us("cpu_memcached_us"), off_cpu_s, threads=workers))
    path = path_queue(busier_directions({name: us(name) for name in demands if is_link(name)}).items())
    if path:  # the path's links as one stage: the busiest one's (module docstring)
        stages.append(Stage(path[0], 0.0, path[1], threads=1))
    if outside_s > 0:
        stages.append(Stage("network", 0.0, outside_s))
    return [s if s.cpu > 0 or s.delay > 0 else Stage(s.name, 1e-9, s.delay, s.threads) for s in stages]


def _measured_demands(row) -> dict[str, float]:
    """A configuration's demands in µs per request: processor time by program, and each link's
    (bytes x 8 / rate; the whole system's requests cross it, so no share per middleware)."""
    demands = {name: float(row.get(name, 0.0) or 0.0) for name in _DEMANDS}
    # Both directions, interpolated each (the busier one may change between populations).
    links = link_demands(pd.Series(row), 1, both=True)
    demands.update({name: seconds * 1e6 for name, seconds in links})
    service_ms = float(row.get("mw_service_ms", math.nan) or math.nan)
    if links and int(row.get("middlewares", 0) or 0) > 0 and row.get("engine") != "evented" and \
            math.isfinite(service_ms):
        demands[WAIT_CAP] = max(service_ms * 1e3 - demands["cpu_memcached_us"], 0.0)
    return demands


def _population(row) -> int:
    return int(row["clients"]) * int(row.get("pipeline", 1) or 1)


def _solve(row, demands: dict, off_cpu_s: float) -> SharedCpuResult:
    cores = int(row.get("cores", 1) or 1)
    return shared_cpu_network(stages_of(row, demands, off_cpu_s), _population(row), cores)


def _calibrated_wait(row, demands: dict) -> float:
    """The off-processor wait z that makes the model give the measured throughput."""
    measured = float(row["throughput"])
    population = _population(row)
    gap = lambda z: _solve(row, demands, z).throughput - measured  # noqa: E731
    if _link_saturated(_solve(row, demands, 0.0), measured):
        return 0.0  # the link holds the throughput: no wait can be told from it (module docstring)
    if gap(0.0) <= 0:
        return 0.0
    upper = population / measured  # all of the response time
    if gap(upper) > 0:
        return upper
    return float(brentq(gap, 0.0, upper, xtol=1e-9, rtol=1e-6))


# A link this busy, in the model without any wait and by the measured throughput, holds the
# throughput to its own rate.
LINK_SATURATED = 0.9


def _link_saturated(result: SharedCpuResult, measured: float) -> bool:
    """The path's link saturated in the model with no wait and in the measurement (X x D). Not
    the model alone: one client whose cycle is mostly the link keeps the model's link as busy,
    at a throughput the wait it spends elsewhere holds well below the link's rate."""
    return any(is_link(name) and stage["thread_utilization"] >= LINK_SATURATED
               and measured * stage["holding_time"] >= LINK_SATURATED
               for name, stage in result.stages.items())


def predict_configurations(
    table: pd.DataFrame,
    config_columns: Sequence[str],
    *,
    calibrate: dict[str, list] | None = None,
    curves: bool = False,
) -> list[Prediction] | tuple[list[Prediction], pd.DataFrame]:
    """Calibrate on some configurations of `table` (a pooled summary table) and predict the rest.

    `calibrate` maps a column to the values whose configurations calibrate (e.g. ``{"clients":
    [2, 32]}``); default: the lowest and highest population of each group.
    """
    missing = [c for c in ("cpu_total_us", "cores", "throughput", "response_ms") if c not in table.columns]
    if missing:
        raise ValueError(
            f"the results have no {', '.join(missing)}: processor time is sampled by runs of this version "
            "of the lab (cpu.json)"
        )
    data = table.reset_index(drop=True)
    ignored = (*POPULATION_COLUMNS, *THREAD_COLUMNS, *DESIGN_COLUMNS)
    group_columns = [c for c in config_columns if c not in ignored]
    predictions: list[Prediction] = []
    curve_rows: list[dict] = []
    for _, group in (data.groupby(group_columns, sort=False, dropna=False) if group_columns else [(None, data)]):
        populations = group.apply(_population, axis=1)
        if calibrate:
            chosen = np.ones(len(group), dtype=bool)
            for column, values in calibrate.items():
                if column not in group:
                    raise ValueError(f"--calibrate: no column {column!r}")
                chosen &= group[column].isin(values).to_numpy()
        else:
            chosen = populations.isin([populations.min(), populations.max()]).to_numpy()
        if not chosen.any():
            raise ValueError("no configuration of a group is chosen for calibration")
        own = {}  # calibration row -> (demands, z)
        for index, row in group[chosen].iterrows():
            demands = _measured_demands(row)
            own[index] = (demands, _calibrated_wait(row, demands))
        points = _points_by_population(group, own)
        threads = [c for c in THREAD_COLUMNS if c in group]
        thread_key = lambda row: tuple(row[c] for c in threads)  # noqa: E731
        # A setting of the thread counts calibrated at two populations or more is interpolated on
        # its own (the off-processor wait a pool holds differs with its size); others borrow the
        # group's, averaged over the thread counts calibrated.
        series_points = {}
        for key in {thread_key(group.loc[i]) for i in own}:
            mine = {i: v for i, v in own.items() if thread_key(group.loc[i]) == key}
            if len({_population(group.loc[i]) for i in mine}) >= 2:
                series_points[key] = _points_by_population(group, mine)
        for (index, row), is_calibration in zip(group.iterrows(), chosen):
            if is_calibration:
                demands, wait = own[index]
            else:
                demands, wait = _interpolate(
                    series_points.get(thread_key(row), points), _population(row), row.get("engine"), _pool_size(row)
                )
            result = _solve(row, demands, wait)
            predictions.append(_prediction(row, config_columns, bool(is_calibration), result, demands, wait))
        if curves:
            curve_rows += _curves(group, points, series_points, thread_key, config_columns)
    if curves:
        return predictions, pd.DataFrame(curve_rows)
    return predictions


CURVE_POINTS = 7


def _curves(group: pd.DataFrame, points: list, series_points: dict, thread_key, config_columns) -> list[dict]:
    """The model over the group's population range, per setting of the thread counts: X(N) at a
    few populations from 1 to the largest measured, and the processors' bound m / C(N)."""
    rows = []
    series_columns = [c for c in config_columns if c in THREAD_COLUMNS]
    for _, first in group.drop_duplicates(series_columns or None).iterrows():
        largest = int(group["clients"].max())
        grid = sorted({int(round(v)) for v in np.geomspace(1, largest, CURVE_POINTS)} | {largest})
        label = configuration_label(first, series_columns) if series_columns else "model"
        for clients in grid:
            row = first.copy()
            row["clients"], row["pipeline"] = clients, 1
            demands, wait = _interpolate(series_points.get(thread_key(first), points), clients, first.get("engine"),
                                         _pool_size(first))
            result = _solve(row, demands, wait)
            cpu_s = sum(demands.get(name, 0.0) for name in _DEMANDS) * 1e-6
            path = path_queue((k, v * 1e-6) for k, v in demands.items() if is_link(k))
            link_s = path[1] if path else 0.0
            # Jain ch. 33's asymptotic bounds: X <= N / D (no queueing: every demand and the wait
            # once; the path's links once, as their one queue), X <= m / C (the processors
            # saturated) and X <= 1 / D_link (the busiest link saturated).
            rows.append({
                "series": label, "clients": clients, "throughput": result.throughput,
                "processor_bound": int(row.get("cores", 1) or 1) / cpu_s if cpu_s > 0 else math.nan,
                "link_bound": 1 / link_s if link_s else math.nan,
                "population_bound": clients / (cpu_s + link_s + wait) if cpu_s + wait > 0 else math.nan,
            })
    return rows


def _load_axis(population: int, engine: object) -> float:
    """Where a population lies on the axis demands are interpolated along. Processor time per
    request falls with load as a per-wake-up cost is shared by the requests a thread finds
    waiting. A pool worker or the net thread wakes per request and finds the queue's backlog:
    c(N) = c_inf + a / N, linear in 1/N (on `make demo` this reproduced the measured demands at 8
    and 16 clients from those at 2 and 32 within 7%, log N 14% off). An event loop batches what
    arrived while it worked, which grows more slowly with N: linear in 1/sqrt(N) (an evented
    run: 3% and 2% off at 8 and 16 clients, where 1/N was 14% and 10% off)."""
    return -1.0 / math.sqrt(population) if engine == "evented" else -1.0 / population


def _points_by_population(group: pd.DataFrame, own: dict) -> list:
    """(N, demands, z) per calibrated population, averaged over the thread counts at it."""
    by_population: dict[int, list] = {}
    for index, (demands, wait) in own.items():
        by_population.setdefault(_population(group.loc[index]), []).append((demands, wait))
    points = []
    for population, items in sorted(by_population.items()):
        names = sorted({name for d, _ in items for name in d})
        demands = {name: float(np.mean([d.get(name, 0.0) for d, _ in items])) for name in names}
        points.append((population, demands, float(np.mean([w for _, w in items]))))
    return points


def _pool_size(row) -> int | None:
    """The requests a pool engine's workers hold at once (workers x middlewares); None for the
    evented engine and without a middleware."""
    middlewares = int(row.get("middlewares", 0) or 0)
    if middlewares <= 0 or row.get("engine") == "evented" or "workers" not in row:
        return None
    return max(int(row["workers"]) * middlewares, 1)


def _interpolate(points: list, population: int, engine: object, pool: int | None = None) -> tuple[dict, float]:
    """Demands along `_load_axis`; the off-processor wait linear in the requests the pool holds
    at once, min(N, pool): it is time spent waiting to be woken and scheduled, which grows with
    the threads the load keeps runnable (on `make demo` with 32 workers it went from 31 µs at 2
    clients to 163 µs at 32), and a pool of W workers keeps at most W of them busy however many
    clients wait in its queue. Along N itself, 4 workers calibrated at 2 clients (latency-bound)
    and 32 (the pool full) gave 8 clients a fifth of the wait the full pool holds, and the model
    over-predicted by +42% (+68-100% on a loaded machine): from 4 clients on the pool was full,
    and it waited as at 32 (issue 33). Calibration populations the cap makes equal average."""
    axis = [_load_axis(p[0], engine) for p in points]
    at = _load_axis(population, engine)
    names = sorted({name for p in points for name in p[1]})
    demands = {name: float(np.interp(at, axis, [p[1].get(name, 0.0) for p in points])) for name in names}
    held = (lambda n: min(n, pool)) if pool else (lambda n: n)  # noqa: E731
    waits: dict[int, list[float]] = {}
    for p in points:
        waits.setdefault(held(p[0]), []).append(p[2])
    levels = sorted(waits)
    return demands, float(np.interp(held(population), levels, [float(np.mean(waits[k])) for k in levels]))


def _prediction(row, config_columns, calibration: bool, result: SharedCpuResult, demands: dict, wait: float):
    # Every link's utilization (X x D; the path's stage among them), then the stages'.
    links = busier_directions({name: v * 1e-6 for name, v in demands.items() if is_link(name)})
    utilizations = {"processors": result.cpu_utilization, **link_utilizations(result.throughput, links.items())}
    for name, stage in result.stages.items():
        if math.isfinite(stage["thread_utilization"]):
            utilizations[name] = stage["thread_utilization"]
    busiest = max(utilizations, key=utilizations.__getitem__)
    bottleneck = busiest if utilizations[busiest] >= LATENCY_BOUND else "none (latency-bound)"
    parameters = {c: plain(row[c]) for c in config_columns}
    measured = {
        "throughput": float(row["throughput"]),
        "response_ms": float(row["response_ms"]),
        "throughput_half_width": float(row.get("throughput_half_width", math.nan)),
        "response_ms_half_width": float(row.get("response_ms_half_width", math.nan)),
        "cpu_cores_busy": float(row.get("cpu_cores_busy", math.nan)),
    }
    predicted = {
        "throughput": result.throughput,
        "response_ms": result.response_time * 1000,
        "utilizations": utilizations,
        "bottleneck": bottleneck,
        "demands_us": {**{k: round(v, 3) for k, v in demands.items()}, "off_cpu_wait_us": round(wait * 1e6, 3)},
        "method": result.method,
    }
    return Prediction(parameters, calibration, predicted, measured)


def predictions_frame(predictions: Sequence[Prediction]) -> pd.DataFrame:
    """One row per configuration: parameters, calibration, predicted and measured X and R, the
    errors (0 inside the measured interval), the bottleneck."""
    rows = []
    for p in predictions:
        rows.append({
            **p.parameters,
            "calibration": p.calibration,
            "throughput_predicted": p.predicted["throughput"],
            "throughput_measured": p.measured["throughput"],
            "throughput_half_width": p.measured["throughput_half_width"],
            "throughput_error": p.error("throughput"),
            "response_ms_predicted": p.predicted["response_ms"],
            "response_ms_measured": p.measured["response_ms"],
            "response_ms_error": p.error("response_ms"),
            "bottleneck": p.predicted["bottleneck"],
        })
    return pd.DataFrame(rows)


def named_bottlenecks(table: pd.DataFrame, config_columns: Sequence[str], key_columns: Sequence[str]) -> dict[tuple, str]:
    """The bottleneck the report names for each configuration, keyed by its `key_columns`
    values (as text): this model's, calibrated as the report's Predictions section calibrates
    it, so that every section names the same resource (the processors, a thread pool or a
    link). Empty when the table cannot be modelled (no processor samples)."""
    try:
        predictions = predict_configurations(table, config_columns)
    except ValueError:
        return {}
    return {tuple(str(p.parameters.get(c)) for c in key_columns): p.predicted["bottleneck"] for p in predictions}
