"""The report's "Over time" section (`analysis.trace_frame`, seed 001 appendix Figures 35-36):
throughput and response time per second through each run of a folder of one configuration
(a trace such as experiments/stability-trace.toml), clients (memrelay-bench's per-second
output) beside each middleware (memrelay's windows.jsonl), and how steady they were."""

from __future__ import annotations

import pandas as pd

from ..analysis import TRACE_MEASURES, trace_frame, trace_statistics
from ..results import ResultsSummary
from . import _plots
from ._document import Figure, Section, Table

MAX_TRACED_RUNS = 3


def trace_section(summary: ResultsSummary) -> Section | None:
    if summary.table["configuration"].nunique() != 1:
        return None
    windows = summary.results.windows
    run_ids = list(summary.runs["run_id"])[:MAX_TRACED_RUNS]
    traces = {run_id: trace_frame(windows, run_id) for run_id in run_ids}
    traces = {run_id: trace for run_id, trace in traces.items() if not trace.empty}
    if not traces:
        return None
    statistics = pd.concat([trace_statistics(t).assign(run=run_id) for run_id, t in traces.items()],
                           ignore_index=True)
    text = [
        "Throughput and response time second by second through each run of this single configuration "
        "(seed 001 appendix, Figures 35 and 36: the stability trace, which seed 002 §1 reads its M/M/1 inputs "
        "from): the clients' per-second intervals (memrelay-bench, all instances summed) and each middleware's "
        "windows (memrelay's windows.jsonl). The grey bands are the trimmed warm-up and cool-down. "
        "The third panel is Figure 36's spread: the standard deviation of the response times inside each "
        "second, on the clients from memrelay-bench's per-interval standard deviation (exact, the instances' "
        "requests of each second pooled) and on each middleware from memrelay's per-window HdrHistograms. The table summarises the kept seconds: a stable run has a small coefficient "
        "of variation (cv = standard "
        "deviation / mean) and a trend (least-squares slope) near zero."
    ]
    items: list[Table | Figure] = [_trace_plot(traces)]
    if not statistics.empty:
        shown = statistics[["run", "source", "measure", "seconds", "mean", "std", "cv", "min", "max",
                            "trend per minute"]]
        items.append(Table("trace_statistics", "Per-second throughput and response time over the kept interval",
                           shown, units={"cv": "probability", "seconds": "count"}))
    return Section("Over time: throughput and response time", text, items)


def _trace_plot(traces: dict[str, pd.DataFrame]) -> Figure:
    plt = _plots.plt
    figure, axes = plt.subplots(len(TRACE_MEASURES), 1, figsize=(10, 8.6), layout="constrained", sharex=True)
    for ax, (measure, label) in zip(axes, TRACE_MEASURES):
        for run_index, (run_id, trace) in enumerate(traces.items()):
            for source_index, (source, part) in enumerate(trace.groupby("source", sort=True)):
                ax.plot(part["t_s"], part[measure], color=f"C{source_index}",
                        linestyle=("-", "--", ":")[run_index % 3], linewidth=1.0, label=f"{run_id} {source}")
                if run_index == 0 and source == "clients":  # the clients' seconds define the trim
                    for t in part.loc[~part["kept"].astype(bool), "t_s"]:
                        ax.axvspan(t, t + 1.0, color="grey", alpha=0.15, linewidth=0)
        ax.set(ylabel=label)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="x-small", ncol=2)
    axes[-1].set(xlabel="time since the load started (s)")
    figure.suptitle("Throughput and response time over time (seed 001 Figures 35-36)")
    return Figure("trace", "Throughput and response time per second through the run", _plots.png_bytes(figure))
