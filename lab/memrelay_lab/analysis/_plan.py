"""Capacity planning: the smallest configuration the calibrated model predicts to carry a
throughput within a response-time bound (`memrelay-lab plan`).

## The model of a candidate

A candidate is a configuration of the calibration group (every parameter of the results but
the counts below) with some counts changed. Its stages are `_predict.stages_of` with demands
calibrated on the results (each configuration's own measured processor time per request and
off-processor wait z, interpolated to the candidate's population as `model predict` does),
scaled by these rules, each a consequence of where a request goes:

- **middlewares** M: a request passes one middleware, so its processor demand is unchanged and
  the middleware's threads (net thread, workers, event loops, a proxy's threads) are M times as
  many (`stages_of` multiplies them already). A middleware host's link carries 1/M of the
  requests when the M middlewares have M hosts (`hosts`: the roles' host counts; M on one host
  share its link).
- **servers** S: with every key on every server (distribution all) a write goes to all S, a
  read to one: memcached's processor demand per request is D (w S'/S + 1 - w) for a write share
  w, and so is the bytes per request through a server's link divided by the server hosts that
  carry them; hashed (ketama), each request goes to R copies whatever S: memcached's demand is
  unchanged, a server link's share is S/S'. On one machine the servers share its cores: more
  servers add no processor.
- **workers** W (pool engine): W threads per middleware; demand unchanged; z is the one
  calibrated at W where W was measured, else averaged over the measured thread counts.
- **client machines** C: more load-generator threads (C x instances x threads per instance);
  a client host's link carries 1/C of the requests (with C hosts).
- **link rate** L (where links are modelled and the hosts are not the testbed's fixed ones):
  every link's demand times L/L'.

  Each link is scaled on its own; then, as in every model, the request's links are one queue,
  the busiest one's (`_links`): with every host shaped, adding middlewares moves the bottleneck to
  the client's or the server's link, which the next candidates add hosts for.
- **population** N: the closed loop's clients, C x instances x threads x clients per thread;
  the planner takes the smallest clients per thread that gives the throughput (X(N) grows with
  N), and the candidate fails when the response time at that N is above the bound (R(N) grows
  with N too: more clients cannot help).

## Uncertainty

Every demand (processor time and bytes through each link, per request) and the measured
throughput the wait is calibrated to have a confidence interval over the repetitions (Student t, the results' level). The throughput interval of a prediction
is the model solved at the pessimistic and optimistic ends: demands at mean + half width and z
calibrated to X - its half width, and the other way round. The response time's interval comes
from the same two solutions.

## p99

The model gives mean response times. A p99 bound is checked by the ratio p99/mean measured at
the calibration configuration of the nearest population (a response-time distribution keeps its
shape as the queue grows less than its mean does: this is a rule of thumb, said in the output).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from .._values import plain
from ..theory import shared_cpu_network
from ._inputs import POPULATION_COLUMNS
from ._predict import (
    DESIGN_COLUMNS,
    THREAD_COLUMNS,
    _calibrated_wait,
    _interpolate,
    _measured_demands,
    _points_by_population,
    stages_of,
)

__all__ = ["Candidate", "Plan", "RoleHostCounts", "candidate_demands", "plan_capacity"]

# How far the search goes beyond the calibration configuration, per count.
MAX_FACTOR = 4
CLIENTS_PER_THREAD_MAX = 64
LINK_FACTORS = (1, 1.5, 2, 3, 4, 6, 8)
MAX_CANDIDATES = 600


@dataclass(frozen=True)
class RoleHostCounts:
    """How many distinct hosts each role can use (None: as many as processes, i.e. each its
    own host; 0 hosts: everything on one machine, no links)."""

    servers: int | None = None
    middlewares: int | None = None
    clients: int | None = None
    links_fixed: bool = False  # the testbed: rates set by `testbed up`, not by the experiment


@dataclass
class Candidate:
    """One configuration the planner tried, and what the model predicts for it."""

    parameters: dict
    size: tuple
    throughput: float = math.nan
    throughput_low: float = math.nan
    throughput_high: float = math.nan
    response_ms: float = math.nan
    response_ms_low: float = math.nan
    response_ms_high: float = math.nan
    p99_ms: float = math.nan
    bottleneck: str = ""
    verdict: str = ""  # "plan", "fails: ...", "larger"
    feasible: bool = False

    def to_dict(self) -> dict:
        return {
            "parameters": {k: plain(v) for k, v in self.parameters.items()},
            "throughput": self.throughput,
            "throughput_interval": [self.throughput_low, self.throughput_high],
            "response_ms": self.response_ms,
            "response_ms_interval": [self.response_ms_low, self.response_ms_high],
            "p99_ms": self.p99_ms,
            "bottleneck": self.bottleneck,
            "feasible": self.feasible,
            "verdict": self.verdict,
        }


@dataclass
class Plan:
    target: float
    response_bound_ms: float | None
    p99_bound_ms: float | None
    base: dict
    knobs: list[str]
    chosen: Candidate | None
    next_smaller: Candidate | None
    candidates: list[Candidate] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "target_throughput": self.target,
            "response_ms_bound": self.response_bound_ms,
            "p99_ms_bound": self.p99_bound_ms,
            "calibration": {k: plain(v) for k, v in self.base.items()},
            "varied": self.knobs,
            "plan": self.chosen.to_dict() if self.chosen else None,
            "next_smaller": self.next_smaller.to_dict() if self.next_smaller else None,
            "candidates": [c.to_dict() for c in self.candidates],
            "notes": self.notes,
        }


# ---------------------------------------------------------------- calibration


@dataclass(frozen=True)
class _Calibration:
    """The calibration points of one group at the mean and at both ends of the intervals."""

    base: pd.Series
    points: dict[str, list]  # "mean" | "slow" | "fast" -> [(N, demands, z)]
    series: dict[str, dict]  # same, per setting of the thread counts
    thread_columns: list[str]
    p99_ratio: list[tuple[int, float]]  # (N, p99 / mean) at the calibration configurations


# The most an end of an interval moves a figure, as a share of its mean. Three repetitions on
# a busy machine can give half widths above the mean (t = 4.3 with two degrees of freedom):
# a throughput at mean - half width would be zero or negative and the model's wait infinite.
# Such an interval says the calibration runs disagree; the plan says so (`Plan.notes`).
MAX_SHIFT = 0.5


def _shifted(row: pd.Series, sign: int) -> pd.Series:
    """A row with every demand column moved by `sign` half widths, and the throughput the
    other way (`sign` = +1: the pessimistic end); each move at most `MAX_SHIFT` of the mean."""
    row = row.copy()

    def moved(value: float, half: float, direction: int) -> float:
        if half is None or not math.isfinite(half):
            return value
        return max(value + direction * min(float(half), MAX_SHIFT * abs(value)), 0.0)

    for column in list(row.index):
        name = str(column)
        # Processor time per request, and bytes per request through each link: every demand.
        if (name.startswith("cpu_") and name.endswith("_us")) or \
                (name.startswith("link:") and name.endswith("_bytes_per_request")):
            if pd.notna(row[column]):
                row[column] = moved(float(row[column]), row.get(f"{column}_half_width", math.nan), sign)
    row["throughput"] = moved(float(row["throughput"]), row.get("throughput_half_width", math.nan), -sign)
    return row


def _wide_intervals(group: pd.DataFrame) -> list[str]:
    """The calibration configurations whose throughput interval is wider than `MAX_SHIFT`."""
    wide = []
    for _, row in group.iterrows():
        half = float(row.get("throughput_half_width", math.nan))
        if math.isfinite(half) and half > MAX_SHIFT * float(row["throughput"]):
            wide.append(f"clients={int(row['clients'])}: {float(row['throughput']):,.0f} ± {half:,.0f}/s")
    return wide


def _calibrate(group: pd.DataFrame) -> _Calibration:
    threads = [c for c in THREAD_COLUMNS if c in group]
    points, series = {}, {}
    for end, sign in (("mean", 0), ("slow", 1), ("fast", -1)):
        own = {}
        for index, row in group.iterrows():
            shifted = _shifted(row, sign) if sign else row
            if sign and shifted.equals(row):  # no interval (one repetition): the mean's own point
                own[index] = mean_own[index]
                continue
            demands = _measured_demands(shifted)
            own[index] = (demands, _calibrated_wait(shifted, demands))
        if not sign:
            mean_own = own
        points[end] = _points_by_population(group, own)
        by_threads = {}
        for key in {tuple(group.loc[i, c] for c in threads) for i in own}:
            mine = {i: v for i, v in own.items() if tuple(group.loc[i, c] for c in threads) == key}
            if len({_population(group.loc[i]) for i in mine}) >= 2:
                by_threads[key] = _points_by_population(group, mine)
        series[end] = by_threads
    ratios = []
    for _, row in group.iterrows():
        mean, p99 = float(row.get("response_ms", math.nan)), float(row.get("response_p99_ms", math.nan) or math.nan)
        if math.isfinite(mean) and math.isfinite(p99) and mean > 0:
            ratios.append((_population(row), p99 / mean))
    base = group.loc[group["throughput"].astype(float).idxmax()]
    return _Calibration(base, points, series, threads, sorted(ratios))


def _population(row) -> int:
    return int(row["clients"]) * int(row.get("pipeline", 1) or 1)


# ---------------------------------------------------------------- scaling a candidate


def candidate_demands(base: pd.Series, candidate: dict, demands: dict[str, float],
                      hosts: RoleHostCounts = RoleHostCounts()) -> dict[str, float]:
    """The demands (µs per request) of `candidate` from those of the calibration row `base`
    (module docstring: how each count changes which demand)."""
    scaled = dict(demands)
    servers0, servers1 = int(base["servers"]), int(candidate["servers"])
    write_share = float(base.get("write_fraction", 0.0) or 0.0)
    replicated = (base.get("distribution") in ("all", None, "n/a")) and int(base.get("middlewares", 0) or 0) > 0 \
        and base.get("middleware", "memrelay") != "twemproxy"
    if "cpu_memcached_us" in scaled and replicated:
        scaled["cpu_memcached_us"] *= write_share * servers1 / servers0 + 1 - write_share

    def spread(role_count0: int, role_count1: int, role_hosts: int | None) -> float:
        """The share of a role's link traffic one of its hosts carries after the change."""
        hosts0 = min(role_count0, role_hosts or role_count0)
        hosts1 = min(role_count1, role_hosts or role_count1)
        return hosts0 / hosts1

    link_factor = float(base.get("link_rate_mbit", 1.0) or 1.0) / float(candidate.get("link_rate_mbit", 1.0) or 1.0) \
        if "link_rate_mbit" in candidate else 1.0
    roles = _link_roles(base)
    for name in list(scaled):
        if not name.startswith("link "):
            continue
        host = name.split(" ", 2)[2]
        role = roles.get(host)
        factor = link_factor
        if role == "middlewares":
            factor *= spread(int(base["middlewares"]), int(candidate["middlewares"]), hosts.middlewares)
        elif role == "clients":
            factor *= spread(int(base["client_machines"]), int(candidate["client_machines"]), hosts.clients)
        elif role == "servers":
            share = spread(servers0, servers1, hosts.servers)
            factor *= (write_share + (1 - write_share) * share) if replicated else share
        scaled[name] *= factor
    return scaled


def _link_roles(row: pd.Series) -> dict[str, str]:
    """Link host -> role, from the ``link:HOST:role`` columns where the loader wrote them, else
    from the host's name (the testbed's and the seeds' names: client*, mw*, server*)."""
    roles = {}
    for column in row.index:
        parts = str(column).split(":")
        if len(parts) == 3 and parts[0] == "link" and parts[2].endswith("_bytes_per_request"):
            host = parts[1]
            lowered = host.lower()
            roles[host] = ("clients" if lowered.startswith("client") else
                           "middlewares" if lowered.startswith(("mw", "middleware")) else
                           "servers" if lowered.startswith("server") else "")
    return roles


# ---------------------------------------------------------------- the search


def _solve(calibration: _Calibration, candidate: dict, end: str, hosts: RoleHostCounts):
    """The model of `candidate` at one end of the intervals ("mean", "slow", "fast")."""
    row = calibration.base.copy()
    for key, value in candidate.items():
        row[key] = value
    row["instances"] = int(candidate["client_machines"]) * int(row.get("instances_per_machine", 1))
    row["clients"] = row["instances"] * int(row.get("threads_per_instance", 1)) * int(candidate["clients_per_thread"])
    key = tuple(row[c] for c in calibration.thread_columns)
    points = calibration.series[end].get(key, calibration.points[end])
    demands, wait = _interpolate(points, _population(row), row.get("engine"))
    demands = candidate_demands(calibration.base, candidate, demands, hosts)
    stages = stages_of(row, demands, wait)
    return shared_cpu_network(stages, _population(row), int(row.get("cores", 1) or 1)), row


def _throughput_bound(calibration: _Calibration, structure: dict, hosts: RoleHostCounts) -> tuple[float, str]:
    """Jain ch. 33's bound at the largest population: the processors (cores / processor time
    per request) and every pool of threads (threads / its time per request)."""
    row = calibration.base.copy()
    for key, value in structure.items():
        row[key] = value
    points = calibration.points["mean"]
    demands, wait = _interpolate(points, points[-1][0], row.get("engine"))
    demands = candidate_demands(calibration.base, structure, demands, hosts)
    stages = stages_of(row, demands, wait)
    cores = int(row.get("cores", 1) or 1)
    bounds = {"processors": cores / max(sum(s.cpu for s in stages), 1e-12)}
    for stage in stages:
        if stage.threads is not None and stage.name != "clients":
            bounds[stage.name] = stage.threads / max(stage.cpu + stage.delay, 1e-12)
    limiting = min(bounds, key=bounds.__getitem__)
    return bounds[limiting], limiting


def _bottleneck(result) -> str:
    utilizations = {"processors": result.cpu_utilization}
    for name, stage in result.stages.items():
        if math.isfinite(stage["thread_utilization"]):
            utilizations[name] = stage["thread_utilization"]
    return max(utilizations, key=utilizations.__getitem__)


def _evaluate(calibration: _Calibration, structure: dict, target: float, response_bound: float | None,
              p99_bound: float | None, hosts: RoleHostCounts) -> Candidate:
    """The smallest population of `structure` that carries `target`, and whether its response
    time meets the bounds."""
    def at(cpt: int):
        return _solve(calibration, {**structure, "clients_per_thread": cpt}, "mean", hosts)[0].throughput

    # No population carries more than the asymptotic bound: a structure below the target fails
    # without solving the network at large populations (slow, and says nothing more).
    bound, limiting = _throughput_bound(calibration, structure, hosts)
    if bound < target:
        return Candidate(parameters=dict(structure), size=_size(structure), throughput=bound,
                         throughput_low=bound, throughput_high=bound, bottleneck=limiting,
                         verdict=f"fails: {limiting} caps it at {bound:,.0f}/s")

    # X(N) grows with N: double until it carries the target, then bisect (fails at low, carries at high).
    cpt = 1
    if at(1) < target:
        low, high = 1, 2
        while at(high) < target and high < CLIENTS_PER_THREAD_MAX:
            low, high = high, min(high * 2, CLIENTS_PER_THREAD_MAX)
        while high - low > 1 and at(high) >= target:
            middle = (low + high) // 2
            if at(middle) >= target:
                high = middle
            else:
                low = middle
        cpt = high
    parameters = {**structure, "clients_per_thread": cpt}
    mean, row = _solve(calibration, parameters, "mean", hosts)
    slow, _ = _solve(calibration, parameters, "slow", hosts)
    fast, _ = _solve(calibration, parameters, "fast", hosts)
    population = _population(row)
    candidate = Candidate(
        parameters={**parameters, "clients": int(row["clients"])},
        size=_size(parameters),
        throughput=mean.throughput,
        throughput_low=min(slow.throughput, fast.throughput, mean.throughput),
        throughput_high=max(slow.throughput, fast.throughput, mean.throughput),
        response_ms=mean.response_time * 1e3,
        response_ms_low=min(slow.response_time, fast.response_time, mean.response_time) * 1e3,
        response_ms_high=max(slow.response_time, fast.response_time, mean.response_time) * 1e3,
        bottleneck=_bottleneck(mean),
    )
    if calibration.p99_ratio:
        nearest = min(calibration.p99_ratio, key=lambda item: abs(math.log(item[0] / population)))
        candidate.p99_ms = candidate.response_ms * nearest[1]
    if mean.throughput < target:
        candidate.verdict = (f"fails: at most {mean.throughput:,.0f}/s with {CLIENTS_PER_THREAD_MAX} clients per "
                             f"thread ({candidate.bottleneck} saturated)")
    elif response_bound is not None and candidate.response_ms > response_bound:
        candidate.verdict = (f"fails: {candidate.response_ms:.3f} ms > {response_bound:g} ms at the "
                             f"{int(row['clients'])} clients that carry it ({candidate.bottleneck} the bottleneck)")
    elif p99_bound is not None and math.isfinite(candidate.p99_ms) and candidate.p99_ms > p99_bound:
        candidate.verdict = (f"fails: p99 about {candidate.p99_ms:.3f} ms > {p99_bound:g} ms "
                             f"({candidate.bottleneck} the bottleneck)")
    else:
        candidate.feasible = True
        candidate.verdict = "carries it"
    return candidate


def _size(structure: dict) -> tuple:
    """Smaller first: fewer machines (servers + middlewares + client machines), a slower link,
    fewer threads."""
    machines = int(structure["servers"]) + int(structure.get("middlewares", 0) or 0) + int(structure["client_machines"])
    return (machines, float(structure.get("link_rate_mbit", 0) or 0), int(structure.get("workers", 0) or 0),
            int(structure["servers"]), int(structure.get("middlewares", 0) or 0))


def _structures(base: pd.Series, hosts: RoleHostCounts, links: bool) -> tuple[list[dict], list[str]]:
    """Every combination of counts the planner tries (module docstring), and which it varies."""
    options: dict[str, list] = {}
    servers0 = int(base["servers"])
    options["servers"] = list(range(1, max(servers0, 1) * MAX_FACTOR + 1)) if servers0 else [servers0]
    middlewares0 = int(base.get("middlewares", 0) or 0)
    if middlewares0:
        options["middlewares"] = list(range(1, middlewares0 * MAX_FACTOR + 1))
    if middlewares0 and base.get("middleware", "memrelay") in ("memrelay", None) and base.get("engine") == "pool":
        workers0 = int(base["workers"])
        options["workers"] = sorted({max(1, workers0 // 2), workers0, workers0 * 2, workers0 * 4})
    options["client_machines"] = list(range(1, int(base["client_machines"]) * MAX_FACTOR + 1))
    if links and not hosts.links_fixed:
        rate = float(base["link_rate_mbit"])
        options["link_rate_mbit"] = [rate * f for f in LINK_FACTORS]
    keys = list(options)
    structures = []
    for combo in itertools.product(*(options[k] for k in keys)):
        structure = dict(zip(keys, combo))
        if middlewares0 and structure["middlewares"] > structure["client_machines"] * int(base.get(
                "instances_per_machine", 1)):
            continue  # every middleware needs a load generator (`_expand`)
        structures.append(structure)
    return sorted(structures, key=_size), [k for k in keys if len(options[k]) > 1]


def plan_capacity(
    table: pd.DataFrame,
    config_columns: Sequence[str],
    target: float,
    *,
    response_bound_ms: float | None = None,
    p99_bound_ms: float | None = None,
    hosts: RoleHostCounts = RoleHostCounts(),
    where: dict | None = None,
) -> Plan:
    """The smallest configuration predicted to carry `target` requests/s within the bounds
    (module docstring). `where` picks the calibration group (column -> value) when the results
    hold several; default: the group of the highest measured throughput."""
    if not (math.isfinite(target) and target > 0):
        raise ValueError(f"the target throughput must be a positive number, got {target!r}")
    missing = [c for c in ("cpu_total_us", "cores", "throughput") if c not in table.columns]
    if missing:
        raise ValueError(f"the results have no {', '.join(missing)}: plan needs results of this lab (cpu.json)")
    data = table.reset_index(drop=True)
    for column, value in (where or {}).items():
        if column not in data:
            raise ValueError(f"--where: no column {column!r}")
        data = data[data[column].astype(str) == str(value)]
    if data.empty:
        raise ValueError("no configuration matches --where")
    ignored = (*POPULATION_COLUMNS, *THREAD_COLUMNS, *DESIGN_COLUMNS)
    group_columns = [c for c in config_columns if c not in ignored]
    best = data.loc[data["throughput"].astype(float).idxmax()]
    group = data
    for column in group_columns:
        group = group[group[column].astype(str) == str(best[column])]
    calibration = _calibrate(group)
    base = calibration.base  # the link rate below is the one candidates' rates are relative to
    link_rates = {str(c).split(":")[1]: base[c] for c in base.index
                  if str(c).startswith("link:") and str(c).endswith(":rate_mbit") and pd.notna(base[c])}
    links = bool(link_rates) and any(str(name).startswith("link ") for name in calibration.points["mean"][0][1])
    notes = []
    if links:
        base["link_rate_mbit"] = float(min(link_rates.values()))
        if len(set(link_rates.values())) > 1:
            notes.append("links of different rates: the link rate option scales every link by the same factor "
                         "(shown: the slowest link's rate)")
    structures, knobs = _structures(base, hosts, links)
    candidates, chosen = [], None
    if len(structures) > MAX_CANDIDATES:
        notes.append(f"{len(structures):,} combinations of counts; the {MAX_CANDIDATES:,} smallest were tried")
    for structure in structures[:MAX_CANDIDATES]:
        candidate = _evaluate(calibration, structure, target, response_bound_ms, p99_bound_ms, hosts)
        candidates.append(candidate)
        if candidate.feasible:
            chosen = candidate
            break
    next_smaller = None
    if chosen is not None:
        next_smaller = _next_smaller(chosen, candidates, knobs)
        chosen.verdict = "plan"
    wide = _wide_intervals(group)
    if wide:
        notes.append(f"calibration runs that disagree by more than ±{MAX_SHIFT:.0%} ({'; '.join(wide)}): the "
                     f"interval's ends are taken at ±{MAX_SHIFT:.0%} of the means (more repetitions, or a quieter "
                     "machine, narrow it)")
    if calibration.p99_ratio and p99_bound_ms is not None:
        notes.append("p99 from the model's mean response time times the p99/mean ratio measured at the "
                     "calibration configuration of the nearest population (a rule of thumb)")
    if hosts.links_fixed and links:
        notes.append("the testbed's link rates are set by `testbed up`: the plan keeps them")
    base_parameters = {c: base[c] for c in (*config_columns, "servers", "middlewares", "client_machines",
                                           "clients_per_thread") if c in base.index}
    shown = _shown(candidates, chosen)
    if next_smaller is not None and next_smaller not in shown:
        shown = [next_smaller, *shown]
    return Plan(target, response_bound_ms, p99_bound_ms, base_parameters, knobs, chosen, next_smaller, shown, notes)


SHOWN = 12


def _next_smaller(chosen: Candidate, candidates: list[Candidate], knobs: list[str]) -> Candidate | None:
    """The plan with one count one step smaller (the one that carries most of those tried),
    which says what the plan's extra resource is for; else the candidate tried just before."""
    def counts(candidate: Candidate) -> dict:
        return {k: candidate.parameters.get(k) for k in knobs}

    mine = counts(chosen)
    neighbours = []
    for candidate in candidates:
        if candidate is chosen:
            continue
        theirs = counts(candidate)
        differing = [k for k in knobs if theirs[k] != mine[k]]
        if len(differing) == 1 and theirs[differing[0]] < mine[differing[0]]:
            neighbours.append(candidate)
    if neighbours:
        return max(neighbours, key=lambda c: (c.parameters[[k for k in knobs if c.parameters.get(k) != mine[k]][0]],
                                              c.throughput))
    earlier = [c for c in candidates if c is not chosen]
    return earlier[-1] if earlier else None


def _shown(candidates: list[Candidate], chosen: Candidate | None) -> list[Candidate]:
    """The candidates worth a table: the last ones tried before the plan, and the plan."""
    return candidates[-SHOWN:]
