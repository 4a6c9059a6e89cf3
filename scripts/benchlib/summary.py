"""Medians per row and target, and memrelay's best setting against the best peer.

The issue's bar per row where a peer can do the job: memrelay (the better of its thread
settings, by median throughput) at least 1.25x the best peer's throughput, p99 no higher, CPU
per request at most 0.8x the best peer's (the best peer being the one with the highest
throughput). A fixed-rate (open-loop) row offers every target the same load: there the
throughput only says whether it kept up, and the bar is p99 and CPU alone."""

from __future__ import annotations

import statistics

from .beforeafter import is_baseline
from .peers import is_peer

THROUGHPUT_BAR = 1.25
CPU_BAR = 0.8


def median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def target_summary(runs: list[dict]) -> dict:
    return {
        "ops_per_sec": median([r["ops_per_sec"] for r in runs]),
        "p50_us": median([r["p50_us"] for r in runs]),
        "p99_us": median([r["p99_us"] for r in runs]),
        "cpu_us_per_request": median([r["cpu_us_per_request"] for r in runs]),
        "user_us_per_request": median([r["user_us_per_request"] for r in runs]),
        "system_us_per_request": median([r["system_us_per_request"] for r in runs]),
        "errors": sum(r["errors"] for r in runs),
        "work_problems": sorted({p for r in runs for p in r["work_problems"]}),
        "runs": runs,
    }


def best(targets: dict[str, dict], names: list[str], fixed_rate: bool = False) -> str | None:
    """The name among `names` with the highest median throughput, or at a fixed rate (where
    every target that keeps up has the same) the lowest p99; None when none ran."""
    ran = [n for n in names if n in targets and targets[n].get("ops_per_sec")]
    if not ran:
        return None
    if fixed_rate:
        return min(ran, key=lambda n: targets[n]["p99_us"])
    return max(ran, key=lambda n: targets[n]["ops_per_sec"])


def verdict(targets: dict[str, dict], fixed_rate: bool = False) -> dict:
    """memrelay's best against the best peer in one row (targets: name -> summary or cannot)."""
    memrelay = best(targets, [n for n in targets if n.startswith("memrelay") and not is_baseline(n)], fixed_rate)
    peer = best(targets, [n for n in targets if is_peer(n)], fixed_rate)
    out = {"memrelay": memrelay, "peer": peer}
    if memrelay and peer:
        m, p = targets[memrelay], targets[peer]
        out["throughput_ratio"] = m["ops_per_sec"] / p["ops_per_sec"]
        out["p99_ratio"] = m["p99_us"] / p["p99_us"] if p["p99_us"] else None
        out["cpu_ratio"] = (m["cpu_us_per_request"] / p["cpu_us_per_request"]
                            if m["cpu_us_per_request"] and p["cpu_us_per_request"] else None)
        fast_enough = out["throughput_ratio"] >= (0.99 if fixed_rate else THROUGHPUT_BAR)
        out["meets_bar"] = (fast_enough and out["p99_ratio"] is not None and out["p99_ratio"] <= 1.0
                            and out["cpu_ratio"] is not None and out["cpu_ratio"] <= CPU_BAR)
    if memrelay and "memcached" in targets and targets["memcached"].get("ops_per_sec"):
        out["of_direct"] = targets[memrelay]["ops_per_sec"] / targets["memcached"]["ops_per_sec"]
    return out


def summarize(samples: dict[tuple[str, str], list[dict] | str], rows, names) -> list[dict]:
    """samples: (row, target) -> the runs, or the reason the target cannot serve the row."""
    table = []
    for row in rows:
        targets = {}
        for name in names:
            got = samples.get((row.name, name))
            if isinstance(got, str):
                targets[name] = {"cannot": got}
            elif got:
                targets[name] = target_summary(got)
        table.append({"row": row.name, "targets": targets, "verdict": verdict(targets, fixed_rate=row.rate is not None)})
    return table
