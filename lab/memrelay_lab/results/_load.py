"""Reading a results folder into tidy pandas DataFrames: ``load(results_dir)``.

``load`` returns a :class:`Results` with

- ``runs``: one row per completed run and *source*: ``clients`` (all bench instances
  together), ``middleware-0``, ``middleware-1``, ... (each middleware) and ``middleware``
  (all middlewares combined, as the seeds do: throughputs summed, times weighted by request
  count, queue length averaged over the middlewares). Baselines (no middleware) have only
  ``clients`` rows.
- ``windows``: the per-second series behind those rows (one row per run, source and window),
  with ``t_s`` (seconds since the load started) and ``kept`` (inside the trimmed interval);
  every window also carries ``response_std_ms``, the standard deviation of the window's
  response times: a middleware's from its HdrHistogram, the clients' from memrelay-bench's
  per-interval ``std`` (the benches of a second pooled exactly: n, Σx and Σx² add up; NaN
  from a bench that wrote none).
- ``servers``: one row per run and memcached server, the change of its ``stats`` counters over
  the load phase (memcached counts every key of a multi-get in cmd_get) and the requests the
  middlewares sent it.
- ``processes``: one row per run and process it started (server-J, middleware-K,
  client-M-I) from the run's cpu.json: ``role``, ``cpu_s`` (processor time over the kept
  interval), ``cpu_utilization`` (cores busy: processor seconds per second), and, when the run
  sampled them, ``received_bytes_per_s`` and ``sent_bytes_per_s`` (TCP payload, over the
  network snapshots' interval just inside the kept one); `_cpu.process_rows`.
- ``status``: one row per planned run with its status (completed, failed, interrupted,
  pending) and the reason of a failure.
- ``manifest``: the manifest as a dict; ``histogram(run_id, source)`` the response-time
  histogram of one run in fixed buckets (100 µs by default, as seed 000 §1.9.2).

Every row carries the configuration columns (servers, client_machines,
instances_per_machine, threads_per_instance, clients_per_thread, clients (total), workload,
ratio, sets, gets, write_fraction, multiget, sharded, middlewares, workers, engine,
distribution, replication, replicas, read_from, value_size, keys, key_pattern, pipeline, protocol,
test_time, warmup, cooldown, ...) and ``experiment``, ``profile``, ``run_id``,
``configuration``, ``repetition``, so ``groupby`` works directly. Keys that do not apply are
filled rather than left empty (pandas' groupby drops empty keys): without a middleware
workers and replicas are 0, sharded is False and engine, distribution, replication are
"n/a"; read_from is "n/a" unless keys are placed with ketama; block is 0 without combinations.

Measures (times in milliseconds, throughputs per second):

- Trimmed: the warm-up and cool-down are cut from each run's series and the means are taken
  over the whole windows left. A client interval ``[s, s+1)`` is kept when
  ``warmup <= s`` and ``s + 1 <= test_time - cooldown``; a middleware window counts in
  proportion to its overlap with ``[load start + warmup, load start + test_time - cooldown]``
  (the load start is the earliest bench start), so both sides cover the same interval. ``throughput`` (and ``throughput_set``/``_get``/``_multiget``,
  ``keys_throughput`` = keys read per second), ``response_ms`` (and per type),
  ``queue_ms``, ``service_ms``, ``queue_length`` (middlewares only), ``count``, ``hits``,
  ``misses``, ``miss_rate``, ``keys_per_request`` (keys per read request), ``errors``,
  ``error_rate``, ``kept_s``.
- Whole run (not trimmed): ``response_p50_ms``, ``_p90_ms``, ``_p99_ms``, ``_p999_ms``.
  Clients: from the benches' HdrHistograms, merged over all instances (exact to HdrHistogram's
  3 significant digits; the histograms cover the whole load phase, so these percentiles
  include the warm-up and cool-down). Middlewares: from the HdrHistograms memrelay writes per
  window, merged over the windows mostly inside the kept interval (trimmed like the means);
  from summary.json's 100 µs buckets (whole run, interpolated inside the bucket) for results
  of an earlier memrelay.
- ``loaders``, ``loaders_overlap``, ``loaders_start_spread_s`` (clients only): how many load
  generators ran, the part of the shortest one's kept interval all of them covered on the lab's
  clock (1: they loaded together; the lab starts them at one instant, ``--start-at``), and how
  far apart their loads began (the check "Load generators ran together" reads them).
- ``count_total`` and ``errors_total``: untrimmed totals (bench totals; middleware summary),
  for checking that both sides saw the same requests.
- From the run's cpu.json (clients only): processor time per request by program and memrelay
  thread role (``cpu_*_us``, `_cpu.cpu_measures`) and bytes per request through each host's
  link (``link:*``, `_links.link_measures`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ._cpu import cpu_measures, process_rows
from ._hdr import HdrHistogram
from ._histograms import bucket_histogram
from ._links import link_measures, link_rates
from ._memcached_stats import parse_stats

__all__ = ["Results", "load"]

_TYPES = ("get", "multiget", "set")
_BENCH_TYPES = ("set", "get", "multiget")
_SERVER_COUNTERS = (
    "cmd_get", "cmd_set", "get_hits", "get_misses", "evictions", "bytes_read", "bytes_written",
    "total_connections", "curr_items",
)
_EPSILON = 1e-6
# Configuration keys that do not apply (None) get a value groupby keeps.
_NOT_APPLICABLE = {
    "workers": 0, "replicas": 0, "sharded": False, "engine": "n/a", "distribution": "n/a", "replication": "n/a",
    "read_from": "n/a", "block": 0, "middleware": "none",
}


@dataclass
class Results:
    """A results folder as DataFrames (see the module docstring for every column)."""

    path: Path
    manifest: dict
    runs: pd.DataFrame
    windows: pd.DataFrame
    servers: pd.DataFrame
    status: pd.DataFrame
    processes: pd.DataFrame = field(default_factory=pd.DataFrame)
    _histograms: dict = field(default_factory=dict, repr=False)

    def histogram(self, run_id: str, source: str = "clients", bucket_us: int = 100,
                  request_type: str | None = None) -> pd.DataFrame:
        """Response-time histogram of one run: columns lower_us, upper_us, count (whole run).

        ``source`` is clients, middleware or middleware-K; ``request_type`` one of get, multiget,
        set (default: all). Client histograms (HdrHistogram) are re-binned into ``bucket_us``
        buckets by each HdrHistogram bucket's lowest value; middleware ones come in 100 µs
        buckets and ``bucket_us`` must be a multiple of 100.
        """
        run = self._run_record(run_id)
        if source == "clients":
            histogram = _client_histogram(self.path, run, request_type)
            if histogram is None or histogram.total == 0:
                return pd.DataFrame({"lower_us": [], "upper_us": [], "count": []})
            index = histogram.values() // bucket_us
            counts = pd.Series(histogram.counts).groupby(index).sum()
        else:
            names = _middleware_names(run) if source == "middleware" else [source]
            if bucket_us % 100:
                raise ValueError("middleware histograms have 100 µs buckets: bucket_us must be a multiple of 100")
            buckets: dict[int, int] = {}
            for name in names:
                summary = _read_json(self.path / _middleware_files(run, name)["summary"])
                for kind, lower, count in _summary_buckets(summary, request_type):
                    buckets[lower // bucket_us] = buckets.get(lower // bucket_us, 0) + count
            counts = pd.Series(buckets, dtype="int64").sort_index()
        counts = counts[counts > 0]
        return pd.DataFrame({
            "lower_us": counts.index.to_numpy() * bucket_us,
            "upper_us": (counts.index.to_numpy() + 1) * bucket_us,
            "count": counts.to_numpy(),
        })

    def middleware_summaries(self, run_id: str) -> list[dict]:
        """The summary.json of every middleware of one run (whole run, untrimmed): memrelay's
        totals and, per request type, the mean and percentiles of its response, queue and
        service times."""
        run = self._run_record(run_id)
        return [_read_json(self.path / _middleware_files(run, name)["summary"]) for name in _middleware_names(run)]

    def _run_record(self, run_id: str) -> dict:
        for record in self.manifest["runs"]:
            if record["id"] == run_id:
                return record
        raise KeyError(f"no run {run_id!r} in {self.path}")


def load(results_dir: str | Path) -> Results:
    """Read ``results_dir`` (written by ``memrelay-lab run``) into a :class:`Results`."""
    path = Path(results_dir)
    manifest = _read_json(path / "manifest.json")
    experiment = manifest["experiment"]
    configurations = {c["index"]: c for c in manifest["configurations"]}
    rows, windows, servers, status, processes = [], [], [], [], []
    for record in manifest["runs"]:
        config = configurations[record["configuration"]]
        identity = {
            "experiment": experiment["name"],
            "profile": experiment.get("profile"),
            "run_id": record["id"],
            "configuration": record["configuration"],
            "repetition": record["repetition"],
            **{k: (_NOT_APPLICABLE.get(k) if v is None else v) for k, v in config.items() if k != "index"},
        }
        status.append({**identity, "status": record["status"], "reason": record.get("reason"),
                       "wall_s": record.get("wall_s")})
        if record["status"] != "completed":
            continue
        run_rows, run_windows = _read_run(path, record, config, clock_offsets(manifest), link_rates(manifest))
        rows += [{**identity, **row} for row in run_rows]
        windows += [{**identity, **window} for window in run_windows]
        servers += [{**identity, **row} for row in _read_servers(path, record)]
        if record["files"].get("cpu"):
            processes += [{**identity, **row} for row in process_rows(_read_json(path / record["files"]["cpu"]))]
    return Results(
        path=path,
        manifest=manifest,
        runs=pd.DataFrame(rows),
        windows=pd.DataFrame(windows),
        servers=pd.DataFrame(servers),
        status=pd.DataFrame(status),
        processes=pd.DataFrame(processes),
    )


# ---------------------------------------------------------------- one run


def clock_offsets(manifest: dict) -> dict[str, float]:
    """Each host's clock minus the lab's, in seconds, from the manifest's measured environment
    (none for results written before hosts were measured: every clock was the lab's)."""
    hosts = (manifest.get("environment") or {}).get("hosts") or {}
    return {name: float(facts.get("clock_offset_s") or 0.0) for name, facts in hosts.items()}


def _read_run(path: Path, record: dict, config: dict, offsets: dict[str, float] | None = None,
              rates: dict[str, float] | None = None) -> tuple[list[dict], list[dict]]:
    """One run's rows and windows; every time a host wrote is put on the lab's clock first
    (its clock offset subtracted), so the windows of several hosts line up."""
    files = record["files"]
    offsets = offsets or {}
    benches = []
    for client in files["clients"]:
        bench = _read_json(path / client["json"])
        bench["start_unix_s"] -= offsets.get(client.get("host"), 0.0)
        benches.append(bench)
    load_start = min(bench["start_unix_s"] for bench in benches)
    keep_from, keep_to = config["warmup"], config["test_time"] - config["cooldown"]

    rows, windows = [], []
    client_windows = _client_windows(benches, keep_from, keep_to)
    client_row = _summarise(client_windows)
    client_row["source"] = "clients"
    merged = _client_histogram(path, record, None)
    client_row.update(_percentiles(lambda q: merged.value_at_quantile(q) if merged else math.nan))
    client_row["response_std_ms"] = merged.std() / 1000 if merged else math.nan
    client_row["count_total"] = sum(b["totals"]["count"] for b in benches)
    client_row["errors_total"] = sum(b["totals"]["errors"] for b in benches)
    client_row["duration_s"] = max(b["duration_s"] for b in benches)
    client_row.update(_loaders_overlap(benches, keep_from, keep_to))
    if files.get("cpu"):
        cpu = _read_json(path / files["cpu"])
        client_row.update(cpu_measures(cpu, client_row.get("throughput", math.nan)))
        population = float(config.get("clients") or 1) * float(config.get("pipeline") or 1)
        client_row.update(link_measures(cpu, client_row.get("throughput", math.nan), rates or {}, population,
                                        requests_between=lambda begin, end: _requests_between(benches, begin, end)))
    rows.append(client_row)
    windows += [{**w, "source": "clients"} for w in client_windows]

    middleware_rows, all_middleware_windows, buckets, kept_hdrs = [], [], [], []
    for k, files_k in enumerate(files["middlewares"]):
        if "summary" not in files_k:  # a proxy measured from outside (twemproxy, memcached's proxy)
            continue
        summary = _read_json(path / files_k["summary"])
        raw = _read_jsonl(path / files_k["windows"])
        offset = offsets.get(files_k.get("host"), 0.0)
        for window in raw:
            window["start_unix"] -= offset
        load_end = max(bench["duration_s"] for bench in benches)
        series = [_middleware_window(w, load_start, keep_from, keep_to, load_end) for w in raw]
        row = _summarise(series)
        row["source"] = f"middleware-{k}"
        hdr = _kept_hdr(raw, series)
        if hdr is not None:
            # The windows' HdrHistograms: trimmed like the means, exact to 3 significant digits.
            kept_hdrs.append(hdr)
            row.update(_percentiles(hdr.value_at_quantile))
            row["response_std_ms"] = hdr.std() / 1000
        else:
            bucket_list = [(lower, count) for _, lower, count in _summary_buckets(summary, None)]
            buckets.append(bucket_list)
            row.update(_percentiles(lambda q, h=bucket_histogram(bucket_list): h.percentile(100 * q)))
        row["count_total"] = summary["totals"]["count"]
        row["errors_total"] = summary["totals"]["errors"]
        row["duration_s"] = summary["duration_s"]
        middleware_rows.append(row)
        windows += [{**w, "source": f"middleware-{k}"} for w in series]
        all_middleware_windows.append(series)
    if middleware_rows:
        rows += middleware_rows
        combined_series = _combine_middleware_windows(all_middleware_windows)
        combined = _combine_middleware_rows(middleware_rows)
        if kept_hdrs and len(kept_hdrs) == len(middleware_rows):
            merged = kept_hdrs[0]
            for other in kept_hdrs[1:]:
                merged = merged.merged(other)
            combined.update(_percentiles(merged.value_at_quantile))
            combined["response_std_ms"] = merged.std() / 1000
        else:
            merged_buckets = [item for bucket_list in buckets for item in bucket_list]
            combined.update(_percentiles(lambda q, h=bucket_histogram(merged_buckets): h.percentile(100 * q)))
        rows.append(combined)
        windows += [{**w, "source": "middleware"} for w in combined_series]
    return rows, windows


def _per_bench(benches: list[dict], keep_from: float, keep_to: float) -> list[list[dict]]:
    return [[_client_interval(i, keep_from, keep_to) for i in bench["intervals"]] for bench in benches]


def _client_interval(interval: dict, keep_from: float, keep_to: float) -> dict:
    second, length = interval["second"], interval["duration_s"]
    kept = length >= 1 - _EPSILON and second >= keep_from - _EPSILON and second + length <= keep_to + _EPSILON
    window = {"window": second, "t_s": float(second), "length_s": length, "kept": kept}
    window.update(_type_measures({kind: _bench_type(interval[kind]) for kind in _BENCH_TYPES}))
    return window


def _requests_between(benches: list[dict], begin: float, end: float) -> float:
    """The requests the benches completed between ``begin`` and ``end`` (the lab's clock), from
    their one-second windows: a window partly inside counts in proportion (the load is steady
    within a second)."""
    total = 0.0
    for bench in benches:
        start = bench["start_unix_s"]
        for interval in bench["intervals"]:
            length = interval["duration_s"]
            low = start + interval["second"]
            inside = min(low + length, end) - max(low, begin)
            if length > 0 and inside > 0:
                total += sum(interval[kind]["count"] for kind in _BENCH_TYPES) * inside / length
    return total


def _loaders_overlap(benches: list[dict], keep_from: float, keep_to: float) -> dict:
    """How well the load generators' kept intervals line up on the lab's clock (their
    ``start_unix_s`` already on it): ``loaders``, ``loaders_overlap`` (the part of the shortest
    kept interval that every one of them covers; 1 when they loaded together, NaN with one) and
    ``loaders_start_spread_s`` (latest start minus earliest). The clients' windows are summed
    second by second, which adds up requests of one moment only when they overlap."""
    spans = []
    for bench, series in zip(benches, _per_bench(benches, keep_from, keep_to)):
        kept = [w for w in series if w["kept"]]
        start = bench["start_unix_s"]
        spans.append((start + kept[0]["t_s"], start + kept[-1]["t_s"] + kept[-1]["length_s"]) if kept else None)
    starts = [bench["start_unix_s"] for bench in benches]
    measures = {"loaders": len(benches), "loaders_start_spread_s": max(starts) - min(starts),
                "loaders_overlap": math.nan}
    if len(benches) < 2:
        return measures
    if any(span is None for span in spans):
        measures["loaders_overlap"] = 0.0
        return measures
    shortest = min(end - begin for begin, end in spans)
    common = min(end for _, end in spans) - max(begin for begin, _ in spans)
    measures["loaders_overlap"] = max(common, 0.0) / shortest if shortest > 0 else 0.0
    return measures


def _bench_type(summary: dict) -> dict:
    latency = summary.get("latency_us") or {}
    return {
        "count": summary["count"], "keys": summary["keys"], "hits": summary["hits"], "misses": summary["misses"],
        "errors": summary["errors"], "response_us_mean": latency.get("mean") or 0.0,
        # memrelay-bench's per-interval spread (seed 001 Figure 36); an older bench has none.
        "response_us_std": latency.get("std", math.nan) if summary["count"] else 0.0,
    }


def _client_windows(benches: list[dict], keep_from: float, keep_to: float) -> list[dict]:
    """The benches' intervals added second by second (their loads begin at one instant, `--start-at`;
    `_loaders_overlap` measures how well)."""
    by_second: dict[int, list[dict]] = {}
    for series in _per_bench(benches, keep_from, keep_to):
        for window in series:
            by_second.setdefault(window["window"], []).append(window)
    combined = []
    for second in sorted(by_second):
        group = by_second[second]
        window = {"window": second, "t_s": float(second), "length_s": min(w["length_s"] for w in group),
                  "kept": all(w["kept"] for w in group) and len(group) == len(benches)}
        window.update(_add_measures(group))
        combined.append(window)
    return combined


def _middleware_window(raw: dict, load_start: float, keep_from: float, keep_to: float, load_end: float) -> dict:
    """One memrelay window. Its clock started with memrelay, not with the load, so its windows
    straddle the kept interval's ends: a window counts in proportion to its overlap with the
    interval, its requests taken as spread evenly over the part of it the load was running
    (``[0, load_end]``), and both sides then cover the same interval (whole windows only would
    cover up to two seconds less than the clients)."""
    t = raw["start_unix"] - load_start
    length = raw["length_s"]
    overlap = min(t + length, keep_to) - max(t, keep_from)
    active = min(t + length, load_end) - max(t, 0.0)
    share = min(overlap / active, 1.0) if active > _EPSILON and overlap > _EPSILON else 0.0
    window = {"window": raw["window"], "t_s": t, "length_s": length, "kept": share > 0}
    types = {kind: raw["types"][kind] for kind in (*_TYPES, "other")}
    measures = _type_measures(types, middleware=True)
    if 0 < share < 1:
        measures = {k: v * share if _is_additive(k) else v for k, v in measures.items()}
    if share > 0 and overlap < length:
        # Also when the load ended inside the kept part (share 1): the rate is over the overlap.
        window["length_s"] = overlap
    window.update(measures)
    window["queue_length"] = raw["queue_length_mean"]
    window["queue_length_max"] = raw["queue_length_max"]
    window["in_system"] = raw.get("in_system_mean", math.nan)
    return window


# The per-window counts (with the `_sum_us` sums, what windows add up and a part of a window has
# a share of; means are derived from them).
_COUNTS = ("count", "read_keys", "hits", "misses", "errors", "count_get", "count_multiget", "count_set")


def _is_additive(key: str) -> bool:
    return key.endswith("_sum_us") or key.endswith("_sum_us2") or key in _COUNTS


def _type_measures(types: dict[str, dict], middleware: bool = False) -> dict:
    """Per-window measures from per-type counters (count-weighted means across types)."""
    measures: dict[str, Any] = {}
    count = sum(t["count"] for t in types.values())
    for kind in _TYPES:
        t = types.get(kind, {"count": 0})
        measures[f"count_{kind}"] = t["count"]
        measures[f"response_{kind}_sum_us"] = t["count"] * (t.get("response_us_mean") or 0.0)
        if middleware:
            measures[f"queue_{kind}_sum_us"] = t["count"] * (t.get("queue_us_mean") or 0.0)
    measures["count"] = count
    measures["read_keys"] = sum(types[k]["keys"] for k in ("get", "multiget") if k in types)
    for name in ("hits", "misses", "errors"):
        measures[name] = sum(t.get(name, 0) for t in types.values())
    for name in ("response", "queue", "service") if middleware else ("response",):
        total = sum(t["count"] * (t.get(f"{name}_us_mean") or 0.0) for t in types.values())
        measures[f"{name}_sum_us"] = total
    if not middleware:
        # Σx² of the window's requests, n (σ² + mean²) per type: what the benches' windows add
        # up to; NaN when the bench wrote no spread (an earlier version).
        measures["response_sq_sum_us2"] = sum(
            t["count"] * (_number(t.get("response_us_std")) ** 2 + (t.get("response_us_mean") or 0.0) ** 2)
            for t in types.values() if t["count"])
    return _window_means(measures)


def _number(value) -> float:
    return float(value) if value is not None else math.nan


def _add_measures(group: list[dict]) -> dict:
    summed = {key: sum(w[key] for w in group) for key in group[0] if _is_additive(key)}
    return _window_means(summed)


def _window_means(measures: dict) -> dict:
    count = measures["count"]
    measures["response_ms"] = measures["response_sum_us"] / count / 1000 if count else math.nan
    if "response_sq_sum_us2" in measures:
        # The standard deviation of the window's response times (over n), from Σx and Σx²: the
        # clients' per-second spread (several benches' intervals pooled), seed 001 Figure 36.
        mean_us = measures["response_sum_us"] / count if count else math.nan
        variance = measures["response_sq_sum_us2"] / count - mean_us**2 if count else math.nan
        measures["response_std_ms"] = math.sqrt(max(variance, 0.0)) / 1000 if np.isfinite(variance) else math.nan
    if "queue_sum_us" in measures:
        measures["queue_ms"] = measures["queue_sum_us"] / count / 1000 if count else math.nan
        measures["service_ms"] = measures["service_sum_us"] / count / 1000 if count else math.nan
    return measures


def _summarise(series: list[dict]) -> dict:
    """Means over the kept windows of one source (clients: the benches added per second)."""
    kept = [w for w in series if w["kept"]]
    seconds = sum(w["length_s"] for w in kept)
    total = lambda key: sum(w.get(key, 0) for w in kept)  # noqa: E731
    count = total("count")
    rate = lambda value: value / seconds if seconds else math.nan  # noqa: E731
    mean_ms = lambda key, n: total(key) / n / 1000 if n else math.nan  # noqa: E731
    reads = total("count_get") + total("count_multiget")
    hits, misses, errors = total("hits"), total("misses"), total("errors")
    row = {
        "kept_s": seconds,
        "count": count,
        "throughput": rate(count),
        "throughput_get": rate(total("count_get")),
        "throughput_multiget": rate(total("count_multiget")),
        "throughput_set": rate(total("count_set")),
        "keys_throughput": rate(total("read_keys")),
        "response_ms": mean_ms("response_sum_us", count),
        "response_get_ms": mean_ms("response_get_sum_us", total("count_get")),
        "response_multiget_ms": mean_ms("response_multiget_sum_us", total("count_multiget")),
        "response_set_ms": mean_ms("response_set_sum_us", total("count_set")),
        **{f"queue_{kind}_ms": mean_ms(f"queue_{kind}_sum_us", total(f"count_{kind}"))
           for kind in _TYPES if kept and f"queue_{kind}_sum_us" in kept[0]},
        "queue_ms": mean_ms("queue_sum_us", count) if kept and "queue_sum_us" in kept[0] else math.nan,
        "service_ms": mean_ms("service_sum_us", count) if kept and "service_sum_us" in kept[0] else math.nan,
        "queue_length": (sum(w["queue_length"] * w["length_s"] for w in kept) / seconds
                         if seconds and "queue_length" in kept[0] else math.nan),
        "in_system": (sum(w["in_system"] * w["length_s"] for w in kept) / seconds
                      if seconds and "in_system" in kept[0] else math.nan),
        "hits": hits,
        "misses": misses,
        "miss_rate": misses / (hits + misses) if hits + misses else math.nan,
        "keys_per_request": total("read_keys") / reads if reads else math.nan,
        "errors": errors,
        "error_rate": errors / count if count else math.nan,
    }
    return row


def _combine_middleware_rows(rows: list[dict]) -> dict:
    """The seeds' combination: throughputs summed, times weighted by request count."""
    combined: dict[str, Any] = {"source": "middleware"}
    count = sum(r["count"] for r in rows)
    for key in ("count", "hits", "misses", "errors", "count_total", "errors_total"):
        combined[key] = sum(r[key] for r in rows)
    for key in ("throughput", "throughput_get", "throughput_multiget", "throughput_set", "keys_throughput"):
        combined[key] = sum(r[key] for r in rows)
    for key, weight in (("response_ms", "count"), ("queue_ms", "count"), ("service_ms", "count")):
        combined[key] = _weighted([(r[key], r[weight]) for r in rows])
    for kind in _TYPES:
        for name in ("response", "queue"):
            if f"{name}_{kind}_ms" in rows[0]:
                combined[f"{name}_{kind}_ms"] = _weighted(
                    [(r[f"{name}_{kind}_ms"], r[f"throughput_{kind}"] * r["kept_s"]) for r in rows])
    combined["queue_length"] = float(np.mean([r["queue_length"] for r in rows]))
    # Requests inside all the middlewares together, as their summed throughput is.
    combined["in_system"] = float(sum(r.get("in_system", math.nan) for r in rows))
    combined["kept_s"] = float(np.mean([r["kept_s"] for r in rows]))
    combined["duration_s"] = max(r["duration_s"] for r in rows)
    hits, misses = combined["hits"], combined["misses"]
    combined["miss_rate"] = misses / (hits + misses) if hits + misses else math.nan
    reads = sum((r["throughput_get"] + r["throughput_multiget"]) * r["kept_s"] for r in rows)
    keys = sum(r["keys_throughput"] * r["kept_s"] for r in rows)
    combined["keys_per_request"] = keys / reads if reads else math.nan
    combined["error_rate"] = combined["errors"] / count if count else math.nan
    return combined


def _combine_middleware_windows(all_series: list[list[dict]]) -> list[dict]:
    """Middleware windows added up by their second since the load start (rounded)."""
    by_second: dict[int, list[dict]] = {}
    for series in all_series:
        for window in series:
            by_second.setdefault(int(round(window["t_s"])), []).append(window)
    combined = []
    for second in sorted(by_second):
        group = by_second[second]
        window = {"window": second, "t_s": float(np.mean([w["t_s"] for w in group])),
                  "length_s": min(w["length_s"] for w in group),
                  "kept": all(w["kept"] for w in group) and len(group) == len(all_series)}
        window.update(_add_measures(group))
        window["queue_length"] = float(np.mean([w["queue_length"] for w in group]))
        window["queue_length_max"] = max(w["queue_length_max"] for w in group)
        combined.append(window)
    return combined


def _weighted(pairs: list[tuple[float, float]]) -> float:
    pairs = [(v, w) for v, w in pairs if w and not math.isnan(v)]
    total = sum(w for _, w in pairs)
    return sum(v * w for v, w in pairs) / total if total else math.nan


# ---------------------------------------------------------------- histograms and percentiles


def _kept_hdr(raw: list[dict], series: list[dict]) -> HdrHistogram | None:
    """The response-time HdrHistograms of the windows mostly inside the kept interval, merged;
    None when memrelay wrote none (an earlier version). Sets each window's ``response_std_ms``
    (the standard deviation of its own requests' response times) on the way."""
    if not any("response_hdr" in w for w in raw):
        return None
    merged = None
    for window, measured in zip(raw, series):
        if not window.get("response_hdr"):
            continue
        histogram = HdrHistogram.decode(window["response_hdr"])
        # The window's own spread (seed 001 Figure 36: the standard deviation per interval).
        measured["response_std_ms"] = histogram.std() / 1000 if histogram.total > 0 else math.nan
        if measured["kept"] and measured["length_s"] >= 0.5 * window["length_s"]:
            merged = histogram if merged is None else merged.merged(histogram)
    return merged if merged is not None and merged.total > 0 else None


def _percentiles(quantile) -> dict:
    return {
        f"response_{name}_ms": quantile(q) / 1000
        for name, q in (("p50", 0.50), ("p90", 0.90), ("p99", 0.99), ("p999", 0.999))
    }


def _client_histogram(path: Path, record: dict, request_type: str | None) -> HdrHistogram | None:
    merged = None
    for client in record["files"]["clients"]:
        bench = _read_json(path / client["json"])
        histogram = HdrHistogram.decode(bench["histograms"][request_type or "totals"])
        merged = histogram if merged is None else merged.merged(histogram)
    return merged


def _summary_buckets(summary: dict, request_type: str | None) -> list[tuple[str, int, int]]:
    kinds = [request_type] if request_type else list(summary["types"])
    result = []
    for kind in kinds:
        histogram = summary["types"][kind]["response_histogram"]
        width = histogram["bucket_us"]
        if width != 100:
            raise ValueError(f"expected 100 µs buckets in summary.json, found {width}")
        result += [(kind, int(lower), int(count)) for lower, count in histogram["buckets"]]
    return result


def _middleware_names(record: dict) -> list[str]:
    """The middlewares that measured themselves (memrelay: summary.json)."""
    return [f"middleware-{k}" for k, files in enumerate(record["files"]["middlewares"]) if "summary" in files]


def _middleware_files(record: dict, name: str) -> dict:
    return record["files"]["middlewares"][int(name.rsplit("-", 1)[1])]


# ---------------------------------------------------------------- servers


def _read_servers(path: Path, record: dict) -> list[dict]:
    files = record["files"]
    per_server_requests: dict[int, int] = {}
    measuring = [files_k for files_k in files["middlewares"] if "summary" in files_k]
    for files_k in measuring:
        summary = _read_json(path / files_k["summary"])
        for j, server in enumerate(summary.get("servers", [])):
            per_server_requests[j] = per_server_requests.get(j, 0) + server["requests"]
    rows = []
    for j, server in enumerate(files["servers"]):
        before = parse_stats((path / server["stats_before"]).read_text())
        after = parse_stats((path / server["stats_after"]).read_text())
        row: dict[str, Any] = {"server": j}
        for counter in _SERVER_COUNTERS:
            if counter == "curr_items":
                row[counter] = int(after.get(counter, 0))
            else:
                row[counter] = int(after.get(counter, 0)) - int(before.get(counter, 0))
        row["middleware_requests"] = per_server_requests.get(j, math.nan) if measuring else math.nan
        rows.append(row)
    return rows


def _read_json(path: Path) -> Any:
    return json.loads(Path(path).read_text())


def _read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
