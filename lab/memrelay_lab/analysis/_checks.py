"""Consistency and validity checks of a results folder, each able to fail (Lancet, USENIX ATC'19,
is the model for run validity): a value, what it was expected to be, and a verdict.

Per run (each compares figures that come from different programs, so a wrong one shows):

- **Little's law at the clients**: N = X R for a closed loop without think time, so X R / N
  (X and R from memrelay-bench, N its virtual clients times the pipeline depth) must be 1
  within the tolerance. Below 1: the clients spend time outside the request (their own
  processing, a stalled client); above 1: requests counted that the clients did not wait for.
- **Little's law inside memrelay**: the requests memrelay sampled inside itself (at random
  instants, each counted from its first byte to its reply, the interval R covers) against its
  X R; skipped when memrelay did not sample them.
- **Flow balance, clients and middlewares**: the throughput memrelay measured against the
  clients' over the same trimmed interval. memrelay's windows begin on its own clock: the two
  that straddle the interval's ends count in proportion to their overlap, as if their requests
  were spread evenly over them, so over a kept interval of a few seconds on a busy machine (a
  rate uneven within a second) the ratio can be several percent off with every request counted
  (6% over 3 s beside a bursty CPU hog); when the interval is the whole load, nothing straddles.
- **Flow balance, middlewares and servers**: the requests memrelay says it sent each server
  against the commands memcached counted itself (`cmd_get` + `cmd_set`, which count keys: only
  with one key per request, otherwise skipped).
- **Byte balance through memrelay**: the bytes the kernel counted on memrelay's sockets
  against the bytes counted on its peers' (cpu.json): what memrelay received must be what the
  clients and the servers sent, and what it sent what they received. The kernel counts each
  socket on its own, so a sampler that misses sockets or mixes up processes shows. The same
  for twemproxy and memcached's proxy (``Byte balance through twemproxy``): the kernel counts
  their sockets as it counts memrelay's.
- **Load generators ran together**: the part of the shortest kept interval of the run's load
  generators that all of them covered, on the lab's clock (each host's clock offset taken out).
  The clients' throughput adds their windows second by second, which is right only when those
  seconds are the same; below `LOADERS_OVERLAP` the sum mixes different moments (loaders that
  began apart, issue 22). Skipped with one load generator.
- **Stationarity**: the drift of throughput across the kept windows (least-squares slope times
  the kept interval, over the mean). A drift above the tolerance means the run had not settled
  (warm-up too short) or the machine changed under it.

Per configuration:

- **Confidence interval width**: the half width of the throughput's and the response time's
  interval over the mean, against a target; when it is wider, how many repetitions (or how
  much longer each run) would narrow it to the target, assuming the spread falls with the
  square root of the samples.
- **Utilization of single-server centres** (given a model's demands): X D for the net thread
  must not exceed 1; a value above 1 is not a busy thread but a wrong demand. Pool engine
  only: the evented engine has no single net thread.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from .._values import configuration_label
from ..theory import mean_confidence_interval
from ._network import measured_demands

__all__ = ["Check", "checks_frame", "consistency_checks", "net_thread_utilization_checks"]

DEFAULT_TOLERANCE = 0.10
DEFAULT_TARGET = 0.05
#: The share of the shortest kept interval every load generator must cover.
LOADERS_OVERLAP = 0.90


@dataclass(frozen=True)
class Check:
    """One check: what, where, the value found, the expectation, and the verdict (None: could
    not be checked, `detail` says why)."""

    check: str
    scope: str
    value: float
    expected: str
    passed: bool | None
    detail: str = ""

    @property
    def verdict(self) -> str:
        return {True: "pass", False: "FAIL", None: "skipped"}[self.passed]


def consistency_checks(
    results,
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    target: float = DEFAULT_TARGET,
    level: float = 0.95,
    config_columns: Sequence[str] = (),
) -> list[Check]:
    """Every check of the module docstring over a loaded results folder."""
    runs = results.runs
    if runs.empty:
        return []
    checks: list[Check] = []
    by_source = {source: frame.set_index("run_id") for source, frame in runs.groupby("source")}
    clients = by_source.get("clients")
    middleware = by_source.get("middleware")
    for run_id, row in (clients.iterrows() if clients is not None else []):
        checks.append(_littles_law_clients(run_id, row, tolerance))
        if middleware is not None and run_id in middleware.index:
            mw = middleware.loc[run_id]
            checks.append(_littles_law_middleware(run_id, mw, tolerance))
            checks.append(_flow_clients_middleware(run_id, row, mw, tolerance))
            checks.append(_flow_middleware_servers(run_id, row, results.servers, tolerance))
        measured_inside = middleware is not None and run_id in middleware.index
        # Any middleware program, memrelay or a proxy measured from outside: the kernel counts its bytes.
        if measured_inside or float(row.get("middlewares", 0) or 0) > 0:
            checks += _byte_balance(run_id, row, results.processes, tolerance)
        checks.append(_loaders_together(run_id, row))
        checks.append(_stationarity(run_id, results.windows, tolerance))
    if clients is not None:
        checks += _interval_widths(clients.reset_index(), target, level, list(config_columns))
    return checks


def checks_frame(checks: Sequence[Check]) -> pd.DataFrame:
    """One row per check, with its verdict."""
    return pd.DataFrame([{**asdict(c), "verdict": c.verdict} for c in checks])


def _ratio_check(name: str, scope: str, ratio: float, tolerance: float, what: str, detail: str = "") -> Check:
    if not math.isfinite(ratio):
        return Check(name, scope, math.nan, what, None, detail or "not measured")
    return Check(name, scope, ratio, f"{what} within ±{tolerance:.0%}", abs(ratio - 1) <= tolerance, detail)


def _littles_law_clients(run_id: str, row: pd.Series, tolerance: float) -> Check:
    population = float(row.get("clients", math.nan)) * float(row.get("pipeline", 1) or 1)
    x, r = float(row.get("throughput", math.nan)), float(row.get("response_ms", math.nan)) / 1000
    ratio = x * r / population if population > 0 else math.nan
    return _ratio_check(
        "Little's law at the clients", run_id, ratio, tolerance, "X·R / N = 1", f"N = {population:g}"
    )


def _littles_law_middleware(run_id: str, mw: pd.Series, tolerance: float) -> Check:
    inside = float(mw.get("in_system", math.nan)) if "in_system" in mw.index else math.nan
    if not math.isfinite(inside):
        return Check("Little's law inside memrelay", run_id, math.nan, "X·R / N = 1", None,
                     "memrelay did not sample the requests inside it")
    x, r = float(mw["throughput"]), float(mw["response_ms"]) / 1000
    # Both engines count a request from the read that brought its first byte until its reply is
    # written, the interval R covers, and memrelay samples that count as of Poisson instants.
    return _ratio_check("Little's law inside memrelay", run_id, x * r / inside if inside > 0 else math.nan,
                        tolerance, "X·R / N = 1", f"N sampled = {inside:.2f}")


def _flow_clients_middleware(run_id: str, clients: pd.Series, mw: pd.Series, tolerance: float) -> Check:
    x_clients, x_mw = float(clients.get("throughput", math.nan)), float(mw.get("throughput", math.nan))
    ratio = x_mw / x_clients if x_clients > 0 else math.nan
    return _ratio_check("Flow balance: clients = middlewares", run_id, ratio, tolerance, "X_mw / X_clients = 1")


def _flow_middleware_servers(run_id: str, clients: pd.Series, servers: pd.DataFrame, tolerance: float) -> Check:
    name = "Flow balance: middlewares = servers"
    if servers.empty or "run_id" not in servers:
        return Check(name, run_id, math.nan, "", None, "no server counters")
    rows = servers[servers["run_id"] == run_id]
    if int(clients.get("multiget", 1) or 1) != 1:
        return Check(name, run_id, math.nan, "", None, "memcached counts keys, memrelay requests (multi-gets)")
    sent = float(rows["middleware_requests"].sum())
    counted = float((rows["cmd_get"] + rows["cmd_set"]).sum())
    ratio = counted / sent if sent > 0 else math.nan
    return _ratio_check(name, run_id, ratio, tolerance, "memcached's cmd_get + cmd_set / sent = 1",
                        f"{counted:,.0f} counted, {sent:,.0f} sent")


def _byte_balance(run_id: str, clients: pd.Series, processes: pd.DataFrame, tolerance: float) -> list[Check]:
    # Any middleware program (memrelay, or a proxy measured from outside): the same kernel counters.
    program = str(clients.get("middleware", "memrelay") or "memrelay")
    program = "memrelay" if program in ("nan", "none") else program
    name = f"Byte balance through {program}"
    if processes.empty or "received_bytes_per_s" not in processes:
        return [Check(name, run_id, math.nan, "", None, "no network counters (results of an earlier lab)")]
    rows = processes[processes["run_id"] == run_id]
    if rows.empty or rows["received_bytes_per_s"].isna().any():
        return [Check(name, run_id, math.nan, "", None, "no network counters for this run")]
    # Every peer must be there: a load generator that exits as the kept interval ends (no
    # cool-down) can miss the processor snapshot and with it the run's process table.
    roles = rows["role"].value_counts()
    expected = {"bench": clients.get("instances"), "memcached": clients.get("servers")}
    for role, count in expected.items():
        if count is not None and pd.notna(count) and int(roles.get(role, 0)) != int(count):
            return [Check(name, run_id, math.nan, "", None,
                          f"{int(roles.get(role, 0))} of {int(count)} {role} processes were sampled")]
    in_middle = rows["role"].isin(["memrelay", "proxy"])
    relay, peers = rows[in_middle], rows[~in_middle]
    checks = []
    for direction, own, other in (("in", "received_bytes_per_s", "sent_bytes_per_s"),
                                  ("out", "sent_bytes_per_s", "received_bytes_per_s")):
        mine, theirs = float(relay[own].sum()), float(peers[other].sum())
        ratio = mine / theirs if theirs > 0 else math.nan
        what = (f"{program}'s received / clients' + servers' sent = 1" if direction == "in"
                else f"{program}'s sent / clients' + servers' received = 1")
        checks.append(_ratio_check(f"{name} ({direction})", run_id, ratio, tolerance, what,
                                   f"{mine / 1e6:,.3f} against {theirs / 1e6:,.3f} MB/s"))
    return checks


def _loaders_together(run_id: str, row: pd.Series) -> Check:
    name = "Load generators ran together"
    expected = f"overlap ≥ {LOADERS_OVERLAP:.0%} of the shortest kept interval"
    overlap = float(row.get("loaders_overlap", math.nan))
    loaders = row.get("loaders")
    if loaders is None or pd.isna(loaders):
        return Check(name, run_id, math.nan, expected, None, "not measured (results of an earlier lab)")
    if int(loaders) < 2:
        return Check(name, run_id, math.nan, expected, None, "one load generator")
    spread = float(row.get("loaders_start_spread_s", math.nan))
    detail = f"{int(loaders)} load generators, their loads began {1000 * spread:,.0f} ms apart"
    if overlap < LOADERS_OVERLAP:
        detail += "; the clients' summed windows mix different moments"
    return Check(name, run_id, overlap, expected, overlap >= LOADERS_OVERLAP, detail)


def _stationarity(run_id: str, windows: pd.DataFrame, tolerance: float) -> Check:
    name = "Stationarity of the kept windows"
    if windows.empty:
        return Check(name, run_id, math.nan, "", None, "no windows")
    kept = windows[(windows["run_id"] == run_id) & (windows["source"] == "clients") & windows["kept"]]
    if len(kept) < 2:
        return Check(name, run_id, math.nan, f"drift within ±{tolerance:.0%}", None,
                     f"{len(kept)} kept windows: too few to see a trend")
    t = kept["t_s"].to_numpy(dtype=float)
    x = (kept["count"] / kept["length_s"]).to_numpy(dtype=float)
    slope = np.polyfit(t, x, 1)[0]
    span = t.max() - t.min() + 1
    drift = slope * span / x.mean() if x.mean() > 0 else math.nan
    return Check(name, run_id, drift, f"drift within ±{tolerance:.0%}", abs(drift) <= tolerance,
                 f"{len(kept)} windows")


def _interval_widths(clients: pd.DataFrame, target: float, level: float, config_columns: list[str]) -> list[Check]:
    checks = []
    for configuration, group in clients.groupby("configuration", sort=True):
        scope = configuration_label(group.iloc[0], config_columns) if config_columns else f"configuration {configuration}"
        for measure in ("throughput", "response_ms"):
            values = group[measure].to_numpy(dtype=float)
            values = values[np.isfinite(values)]
            name = f"Confidence interval of {'throughput' if measure == 'throughput' else 'response time'}"
            if values.size < 2:
                checks.append(Check(name, scope, math.nan, f"half width ≤ {target:.0%} of the mean", None,
                                    f"{values.size} repetition: no interval"))
                continue
            interval = mean_confidence_interval(values, level)
            relative = interval.half_width / abs(interval.mean) if interval.mean else math.inf
            detail = f"{values.size} repetitions"
            if relative > target:
                factor = (relative / target) ** 2
                detail += f"; ±{target:.0%} needs ~{math.ceil(values.size * factor)} or {factor:.1f}× longer runs"
            checks.append(Check(name, scope, relative, f"half width ≤ {target:.0%} of the mean",
                                relative <= target, detail))
    return checks


def net_thread_utilization_checks(table: pd.DataFrame, config_columns: Sequence[str] = ()) -> list[Check]:
    """X·D of the net thread (a single-server centre) with the demand the network model takes
    from one configuration's means (`measured_demands`); above 1 the demand cannot be right
    (a clock residual that includes waiting for a processor is not a service demand)."""
    checks = []
    for _, row in table.iterrows():
        if not float(row.get("middlewares", 0) or 0) > 0 or not math.isfinite(float(row.get("mw_response_ms", math.nan))):
            continue
        if row.get("engine") == "evented":
            continue  # no single net thread: each event loop reads, routes and answers its own clients
        demands = measured_demands(row)
        per_middleware = float(row["mw_throughput"]) / int(row["middlewares"])
        value = per_middleware * demands.net_thread
        scope = configuration_label(row, list(config_columns)) if config_columns else f"configuration {row['configuration']}"
        checks.append(Check("Utilization of a single-server centre (net thread)", scope, value,
                            "X·D ≤ 1", value <= 1.0,
                            f"D = {demands.net_thread * 1e6:,.1f} µs at X = {per_middleware:,.0f}/s"))
    return checks
