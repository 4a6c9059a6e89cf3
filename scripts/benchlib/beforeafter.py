"""Before/after in one run: memrelay targets started from an earlier build beside this one.

`--baseline-bin DIR` (scripts/bench_proxies.py, scripts/bench_memory.py) names a directory with an
earlier `memrelay`; every memrelay target then also runs from it as `NAME@baseline`, interleaved
with this build's, so both meet the same load on this shared machine. scripts/benchlib/peers.py
starts a `NAME@baseline` target from that directory.

Ratios are after / before: this build over the baseline build. Where the runs carry the repetition
they belong to (`rep`), a ratio is the median of the per-repetition ratios (before and after
measured in the same repetition, so minutes apart at most); else the ratio of the medians.
"""

from __future__ import annotations

import statistics
from pathlib import Path

SUFFIX = "@baseline"


def problem(baseline_bin: Path) -> str | None:
    """Why `baseline_bin` cannot serve as the baseline, or None."""
    if not (baseline_bin / "memrelay").is_file():
        return f"no memrelay binary in {baseline_bin}"
    return None


def with_baselines(names: list[str]) -> list[str]:
    """`names` with NAME@baseline right after each memrelay target."""
    return [n for name in names for n in ([name, name + SUFFIX] if name.startswith("memrelay") else [name])]


def is_baseline(name: str) -> bool:
    return name.endswith(SUFFIX)


def paired(names: list[str]) -> list[str]:
    """This build's targets that have a baseline beside them."""
    return [n for n in names if n + SUFFIX in names]


def ratio(after: dict, before: dict, key: str) -> float | None:
    """after / before of `key` for two cells (each with its `runs`): the median of the per-repetition
    ratios where the runs say their repetition, else the ratio of the cells' medians."""
    old = {r["rep"]: r[key] for r in before.get("runs", []) if "rep" in r}
    per_rep = [r[key] / old[r["rep"]] for r in after.get("runs", []) if r.get("rep") in old and old[r["rep"]]]
    if per_rep:
        return statistics.median(per_rep)
    return after[key] / before[key] if after.get(key) and before.get(key) else None


def pairs(targets: dict[str, dict], names: list[str]) -> list[tuple[str, dict, dict]]:
    """(name, after cell, before cell) for every paired target of a row that both builds measured."""
    out = []
    for name in paired(names):
        after, before = targets.get(name), targets.get(name + SUFFIX)
        if after and before and "cannot" not in after and "cannot" not in before:
            out.append((name, after, before))
    return out
