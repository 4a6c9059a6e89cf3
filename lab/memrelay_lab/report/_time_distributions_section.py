"""The report's "Queue and server time distributions" section (`analysis._time_distributions`,
seed 001 §1.3): Table 4 and Figures 4-6 for the configuration that reaches the maximum
throughput with the fewest resources; against the swept parameter, per request type, the
percentiles of T_total, T_queue and T_server (seed 001 Figures 9-12, 23-34) and their means
with standard deviations (Figures 13-16); and every configuration's numbers in one table."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..analysis import REQUEST_TIMES, logged_requests, max_throughput, summary_time_distributions, time_distributions
from ..results import ResultsSummary
from . import _plots
from ._document import Figure, Section, Table

_TIME_LABELS = {"total": "T_total (in the middleware)", "queue": "T_queue (request queue)",
                "server": "T_server (in the servers)"}


def time_distributions_section(summary: ResultsSummary) -> Section | None:
    frame = time_distributions(summary)
    logged = frame is not None
    if not logged:
        frame = summary_time_distributions(summary)
        if frame is None:
            return None
    chosen = _chosen_configuration(summary, frame)
    label = summary.label(summary.table.set_index("configuration").loc[chosen].to_dict()) or "the one configuration"
    one = frame[frame["configuration"] == chosen]
    shown = one[["type", "time", "requests", "mean_ms", "std_ms", "p50_ms", "p90_ms", "p99_ms"]].copy()
    if not logged:
        shown = shown.drop(columns="std_ms")
    shown["time"] = shown["time"].map(_TIME_LABELS)
    shown = shown.rename(columns={"requests": "logged requests" if logged else "requests", "mean_ms": "mean (ms)",
                                  "std_ms": "std (ms)", "p50_ms": "p50 (ms)", "p90_ms": "p90 (ms)",
                                  "p99_ms": "p99 (ms)"})
    if logged:
        source = (
            "the requests memrelay logged with their timestamps (every N-th, `request_log_sample`), inside the "
            "trimmed interval, pooled over the repetitions. Percentiles are order statistics of the logged "
            "requests; the standard deviation beside the mean shows how far the tails reach."
        )
    else:
        source = (
            "memrelay's summary.json, as no run logged requests (`request_log_sample`): per request type the mean "
            "and percentiles of each time over the whole run (warm-up and cool-down included); the mean pooled over "
            "the repetitions and middlewares, each percentile the median of the runs' own (separate runs' "
            "percentiles cannot be pooled). No standard deviation and no histograms: set `request_log_sample` for "
            "those."
        )
    text = [
        "Where a request's time in the middleware goes, as distributions rather than means (seed 001 §1.3, Table 4, "
        "Figures 4-6): T_total runs from the request's arrival to its reply written, T_queue is its wait in the "
        "request queue, T_server the time from its first request to a server to the last reply. From " + source
        + f" Table: {label}, the configuration reaching the maximum throughput with the fewest resources."
    ]
    items: list[Table | Figure] = [
        Table("time_distributions", f"Time distributions in the middleware, {label} (seed 001 Table 4)",
              shown, csv=frame),
    ]
    if logged:
        items.append(_histograms(logged_requests(summary, chosen), label))
    for plot in (_percentiles_plot(frame, summary), _means_plot(frame, summary) if logged else None):
        if plot is not None:
            items.append(plot)
    if frame["configuration"].nunique() > 1:
        columns = [c for c in summary.display_columns if c in frame]
        every = frame[[*columns, "type", "time", "requests", "mean_ms", "std_ms", "p50_ms", "p90_ms", "p99_ms"]]
        every = every.drop(columns=[] if logged else ["std_ms"]).assign(time=lambda f: f["time"].map(_TIME_LABELS))
        items.append(Table("time_distributions_every_configuration", "Time distributions of every configuration "
                           "(seed 001 Figures 9-16, 23-34 as numbers)", every, csv=frame))
    return Section("Queue and server time distributions", text, items)


def _chosen_configuration(summary: ResultsSummary, frame: pd.DataFrame) -> int:
    logged = summary.table[summary.table["configuration"].isin(frame["configuration"])]
    found = max_throughput(logged)
    if found is not None:
        return int(found.smallest["configuration"])
    return int(logged.sort_values("throughput", ascending=False)["configuration"].iloc[0])


def _histograms(log: pd.DataFrame, label: str) -> Figure:
    plt = _plots.plt
    figure, axes = plt.subplots(1, 3, figsize=(11, 3.4), layout="constrained")
    kinds = [k for k in ("get", "multiget", "set") if (log["type"] == k).any()]
    for ax, (time, column) in zip(axes, REQUEST_TIMES.items()):
        values_ms = log[column].to_numpy(dtype=float) / 1e3
        # Up to the 99.5th percentile: the far tail would squeeze the body into one bar.
        top = float(np.percentile(values_ms, 99.5)) if values_ms.size else 1.0
        bins = np.linspace(0.0, max(top, 1e-3), 41)
        for kind in kinds:
            of_kind = log.loc[log["type"] == kind, column].to_numpy(dtype=float) / 1e3
            ax.hist(np.clip(of_kind, 0, bins[-1]), bins=bins, alpha=0.6, label=kind)
        ax.set_title(_TIME_LABELS[time], fontsize="medium")
        ax.set_xlabel("time (ms; last bar: ≥ 99.5th percentile)")
        ax.set_ylabel("logged requests")
        ax.legend(fontsize="small")
    figure.suptitle(f"Time distributions in the middleware, {label}")
    return Figure("time_histograms", f"Histograms of T_total, T_queue and T_server, {label} (seed 001 Figures 4-6)",
                  _plots.png_bytes(figure))


def _percentiles_plot(frame: pd.DataFrame, summary: ResultsSummary) -> Figure | None:
    x = summary.x
    if x is None or x not in frame or frame[x].nunique() < 2:
        return None
    plt = _plots.plt
    kinds = [k for k in ("get", "multiget", "set") if (frame["type"] == k).any()]
    figure, axes = plt.subplots(len(kinds), 3, figsize=(13, 3.3 * len(kinds)), layout="constrained", squeeze=False)
    for row, kind in zip(axes, kinds):
        for ax, time in zip(row, ("total", "queue", "server")):
            part = frame[(frame["type"] == kind) & (frame["time"] == time)]
            # One colour per series, one line style per percentile.
            for colour, (series_name, group) in enumerate(_plots.series_frames(part, x, summary.series)):
                for column, style in (("p50_ms", ":"), ("p90_ms", "--"), ("p99_ms", "-")):
                    ax.plot(group[x], group[column], linestyle=style, marker="o", markersize=3, color=f"C{colour}",
                            label=f"{column[:3]} {series_name}" if summary.series else column[:3])
            ax.set_title(f"{kind}: {_TIME_LABELS[time]}", fontsize="medium")
            ax.set_xlabel(_plots.axis_label(x))
            ax.set_ylabel("time (ms)")
            ax.set_ylim(bottom=0)
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize="x-small", ncol=2)
    return Figure("time_percentiles", "50th, 90th and 99th percentiles of total, queue and server time "
                  "(seed 001 Figures 9-12, 23-34)", _plots.png_bytes(figure))


def _means_plot(frame: pd.DataFrame, summary: ResultsSummary) -> Figure | None:
    """Mean and standard deviation (error bars) of each time per request type against x (seed 001
    Figures 13-16); only from request logs, which give the standard deviation."""
    x = summary.x
    if x is None or x not in frame or frame[x].nunique() < 2 or frame["std_ms"].isna().all():
        return None
    plt = _plots.plt
    kinds = [k for k in ("get", "multiget", "set") if (frame["type"] == k).any()]
    figure, axes = plt.subplots(len(kinds), 3, figsize=(13, 3.3 * len(kinds)), layout="constrained", squeeze=False)
    for row, kind in zip(axes, kinds):
        for ax, time in zip(row, ("total", "queue", "server")):
            part = frame[(frame["type"] == kind) & (frame["time"] == time)]
            for colour, (series_name, group) in enumerate(_plots.series_frames(part, x, summary.series)):
                ax.errorbar(group[x], group["mean_ms"], yerr=group["std_ms"], marker="o", markersize=3, capsize=3,
                            color=f"C{colour}", label=series_name or "mean ± std")
            ax.set_title(f"{kind}: {_TIME_LABELS[time]}", fontsize="medium")
            ax.set_xlabel(_plots.axis_label(x))
            ax.set_ylabel("time (ms)")
            ax.set_ylim(bottom=0)
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize="x-small")
    return Figure("time_means", "Mean and standard deviation of total, queue and server time (seed 001 Figures "
                  "13-16)", _plots.png_bytes(figure))
