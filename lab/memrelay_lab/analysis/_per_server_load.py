"""Per-server load, server network rates and queue length over time (issue 14, item 8; seed 004),
from what a results folder already holds: `load()`'s ``servers`` (memcached stats deltas over
the load phase and the requests the middlewares sent each server) and ``windows`` (the
per-second series, with memrelay's ``queue_length``). No CPU figures: the results hold none.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

__all__ = ["plot_queue_length", "queue_length_series", "server_load"]


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


def plot_queue_length(series: pd.DataFrame, path: Path) -> Path:
    """Queue length against time, one line per run and middleware."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    for (run_id, source), part in series.groupby(["run_id", "source"]):
        ax.plot(part["t_s"], part["queue_length"], label=f"{run_id} {source}", linewidth=0.9)
    ax.set(xlabel="time since load start (s)", ylabel="queue length", title="memrelay queue length over time")
    if series["run_id"].nunique() * series["source"].nunique() <= 10:
        ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
