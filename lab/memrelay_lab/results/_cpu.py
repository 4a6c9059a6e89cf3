"""What a run's cpu.json (written by the run's processor sampler, `experiment._cpu`) says about
processor use: the processor time per request by program and by memrelay thread role, which the
clients' row carries (the utilization law's input), and one row per process of the `processes`
table (its processor time and TCP bytes per second)."""

from __future__ import annotations

import math

from ..experiment import thread_role

__all__ = ["cpu_measures", "process_rows"]


def cpu_measures(document: dict, throughput: float) -> dict:
    """Processor time over the kept interval (cpu.json, written by the run): per request in µs
    by program and by memrelay thread role, the cores busy, and the cores usable."""
    start, end = document["interval_unix"]
    seconds = max(end - start, 1e-9)
    requests = throughput * seconds if throughput and math.isfinite(throughput) else math.nan
    by_role: dict[str, float] = {"bench": 0.0, "memrelay": 0.0, "memcached": 0.0, "proxy": 0.0}
    by_thread: dict[str, float] = {"net": 0.0, "worker": 0.0, "loop": 0.0, "other": 0.0}
    for record in document["processes"].values():
        if "cpu_s" not in record:  # only network bytes: the process left before the last snapshot
            continue
        by_role[record["role"]] = by_role.get(record["role"], 0.0) + record["cpu_s"]
        for thread, cpu_s in record.get("threads", {}).items():
            by_thread[thread_role(thread)] += cpu_s
    measures = {f"cpu_{role}_us": 1e6 * cpu_s / requests for role, cpu_s in by_role.items()}
    if by_role["memrelay"] > 0:
        measures.update({f"cpu_{role}_us": 1e6 * cpu_s / requests for role, cpu_s in by_thread.items()})
    # The middleware program's processor time whichever it is (memrelay or another proxy).
    measures["cpu_middleware_us"] = 1e6 * (by_role["memrelay"] + by_role["proxy"]) / requests
    measures["cpu_total_us"] = 1e6 * sum(by_role.values()) / requests
    measures["cpu_cores_busy"] = sum(by_role.values()) / seconds
    measures["cores"] = document["cores"]["usable"]
    return measures


def process_rows(document: dict) -> list[dict]:
    """One row per process of a run's cpu.json: its processor and network use per second."""
    start, end = document["interval_unix"]
    seconds = max(end - start, 1e-9)
    network_start, network_end = document.get("network_interval_unix", (start, end))
    network_seconds = max(network_end - network_start, 1e-9)
    rows = []
    for name, record in document["processes"].items():
        cpu_s = record.get("cpu_s", math.nan)  # absent: the process left before the last snapshot
        row = {"process": name, "role": record["role"], "cpu_s": cpu_s, "cpu_utilization": cpu_s / seconds}
        for key in ("received_bytes", "sent_bytes"):
            row[f"{key}_per_s"] = record[key] / network_seconds if key in record else math.nan
        rows.append(row)
    return rows
