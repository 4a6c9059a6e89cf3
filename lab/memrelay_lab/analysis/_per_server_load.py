"""The load on every process of a run (seed 004): per-server shares of the requests and
network rates from memcached's own counters (`server_load`), every process's processor and
network use (`process_utilization`, from the run's cpu.json), and memrelay's queue length over
time (`queue_length_series`)."""

from __future__ import annotations

import pandas as pd

__all__ = ["process_utilization", "queue_length_series", "server_load"]


def server_load(servers: pd.DataFrame) -> pd.DataFrame:
    """One row per run and server: its share of the middlewares' requests and of memcached's
    commands, and its network rates (bytes/s read and written over ``test_time`` seconds)."""
    load = servers.copy()
    commands = load["cmd_get"] + load["cmd_set"]
    requests = load["middleware_requests"]
    load["request_share"] = requests / requests.groupby(load["run_id"]).transform("sum")
    load["command_share"] = commands / commands.groupby(load["run_id"]).transform("sum")
    load["bytes_read_per_s"] = load["bytes_read"] / load["test_time"]
    load["bytes_written_per_s"] = load["bytes_written"] / load["test_time"]
    return load[
        ["run_id", "server", "request_share", "command_share", "bytes_read_per_s", "bytes_written_per_s"]
    ].reset_index(drop=True)


def queue_length_series(windows: pd.DataFrame) -> pd.DataFrame:
    """The per-second queue length of every middleware (sources ``middleware-k``) per run."""
    if "queue_length" not in windows.columns:
        return pd.DataFrame(columns=["run_id", "source", "t_s", "queue_length"])
    mask = windows["source"].astype(str).str.match(r"middleware-\d+$")
    series = windows.loc[mask, ["run_id", "source", "t_s", "queue_length"]].dropna(subset=["queue_length"])
    return series.sort_values(["run_id", "source", "t_s"]).reset_index(drop=True)


def process_utilization(processes: pd.DataFrame, config_columns: list[str]) -> pd.DataFrame | None:
    """One row per configuration and process: its role, the cores it kept busy (processor
    seconds per second) and the bytes per second it received and sent over TCP, means over the
    repetitions; None when no run sampled its processes."""
    if processes.empty:
        return None
    keys = ["configuration", *[c for c in config_columns if c in processes], "process", "role"]
    measures = [c for c in ("cpu_utilization", "received_bytes_per_s", "sent_bytes_per_s") if c in processes]
    frame = processes.groupby(keys, sort=True, dropna=False)[measures].mean().reset_index()
    order = {"bench": 0, "memrelay": 1, "memcached": 2}
    frame["_order"] = frame["role"].map(order).fillna(3)
    return frame.sort_values(["configuration", "_order", "process"]).drop(columns="_order").reset_index(drop=True)
