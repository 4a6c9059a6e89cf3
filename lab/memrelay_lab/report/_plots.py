"""The report's figures, drawn with matplotlib's Agg backend (no display needed).

Each function takes analysis results and returns a `Figure`, or None when the data give
the plot nothing to show (its x-axis would have a single value, the folder has no
middleware, ...). The figures are the seeds':

- `throughput_plot`, `response_time_plot`: against clients (or the swept parameter when
  clients are fixed), one line per value of the other swept parameters (worker threads,
  ...), error bars = confidence interval over repetitions (seed 000 Figures 4-20);
  `throughput_per_type_plot`: the gets' or the sets' throughput alone (seed 001 Figures 7-8).
- `time_breakdown_plot`: queue, servers, rest of the middleware and network time against
  the same x, one panel per line of the throughput plot (seed 000 Figures 9, 11, 21, 23).
- `percentiles_plot`: client-side mean and percentiles from merged histograms against the
  multi-get size (seed 000 Figures 22, 24).
- `histograms_plot`: response-time histograms on the clients and on the middleware,
  100 µs buckets, counts per second (seed 000 Figure 26).
- `keys_per_second_plot`: values read per second against the multi-get size (Figure 27).
- `factorial_plot`: the share of variation explained by each effect (seed 000 §6).
- `interactive_law_plot`: measured against interactive-law throughput and response time.
- `model_plot`: MVA-predicted against measured throughput and response time.

`png_bytes(figure)` renders a figure to PNG bytes and closes it; `report_figure(name, caption,
figure)` makes it the report's `Figure` (None, a plot with nothing to show, stays None).
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import FuncFormatter, ScalarFormatter  # noqa: E402

from .._values import configuration_label  # noqa: E402
from ..results import BUCKET_US, Histogram, percentile_columns  # noqa: E402
from . import _document  # noqa: E402

__all__ = [
    "factorial_plot",
    "histograms_plot",
    "interactive_law_plot",
    "keys_per_second_plot",
    "model_plot",
    "percentiles_plot",
    "png_bytes",
    "report_figure",
    "response_time_plot",
    "throughput_per_type_plot",
    "throughput_plot",
    "time_breakdown_plot",
]

DPI = 100
MAX_PANELS = 8
PLOTTED_PERCENTILES = (25.0, 50.0, 75.0, 90.0, 99.0)

_LABELS = {
    "clients": "Number of clients",
    "multiget": "Multi-get size (keys)",
    "workers": "Worker threads per middleware",
    "servers": "Servers",
    "middlewares": "Middlewares",
    "value_size": "Value size (bytes)",
    "pipeline": "Requests in flight per client",
}


def axis_label(column: str) -> str:
    return _LABELS.get(column, column.replace("_", " "))


def series_label(keys: Mapping[str, object]) -> str:
    return configuration_label(keys, empty="all")


def png_bytes(figure: Figure) -> bytes:
    """The figure as PNG; the figure is closed afterwards."""
    buffer = io.BytesIO()
    for ax in figure.axes:  # 17,530 rather than 17530 on the axes, as in the tables
        for axis in (ax.xaxis, ax.yaxis):
            if axis.get_scale() == "linear" and isinstance(axis.get_major_formatter(), ScalarFormatter):
                axis.set_major_formatter(FuncFormatter(_tick))
    try:
        figure.savefig(buffer, format="png", dpi=DPI)
    finally:
        plt.close(figure)
    return buffer.getvalue()


def report_figure(name: str, caption: str, figure: Figure | None) -> _document.Figure | None:
    """The figure as the report's `Figure` (PNG, closed), or None when the plot had nothing to show."""
    if figure is None:
        return None
    return _document.Figure(name, caption, png_bytes(figure))


def _tick(value: float, _position: object) -> str:
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:g}"


def series_frames(table: pd.DataFrame, x: str, by: Sequence[str]):
    """(label, rows sorted by x) for each combination of the `by` columns."""
    if not by:
        yield "all", table.sort_values(x)
        return
    for key, group in table.groupby(list(by), sort=True, dropna=False):
        keys = key if isinstance(key, tuple) else (key,)
        yield series_label(dict(zip(by, keys))), group.sort_values(x)


def _errorbar(ax, frame: pd.DataFrame, x: str, column: str, label: str, scale: float = 1.0, **style) -> None:
    y = frame[column].to_numpy(dtype=float) * scale
    half = f"{column}_half_width"
    error = frame[half].to_numpy(dtype=float) * scale if half in frame else None
    if error is not None and np.all(~np.isfinite(error)):
        error = None
    elif error is not None:
        error = np.where(np.isfinite(error), error, 0.0)
    ax.errorbar(frame[x].to_numpy(dtype=float), y, yerr=error, label=label, marker="o", capsize=3, **style)


def _line_plot(
    table: pd.DataFrame,
    x: str,
    by: Sequence[str],
    column: str,
    ylabel: str,
    title: str,
    level: float,
    scale: float = 1.0,
) -> Figure | None:
    if column not in table or table[x].nunique() < 2 or table[column].notna().sum() == 0:
        return None
    figure, ax = plt.subplots(figsize=(7, 4.2), layout="constrained")
    for label, frame in series_frames(table, x, by):
        frame = frame[frame[column].notna()]
        if not frame.empty:
            _errorbar(ax, frame, x, column, label, scale)
    ax.set_xlabel(axis_label(x))
    ax.set_ylabel(ylabel)
    ax.set_title(f"{title} ({level:.0%} confidence intervals)")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    if by:
        ax.legend(fontsize="small")
    return figure


def throughput_plot(
    table: pd.DataFrame, x: str, by: Sequence[str], level: float, side: str = "clients"
) -> Figure | None:
    """Throughput against x, one line per `by` combination, CI error bars."""
    column = "throughput" if side == "clients" else "mw_throughput"
    return _line_plot(
        table, x, by, column, "Throughput (requests/s)", f"Throughput measured on the {side}", level
    )


def throughput_per_type_plot(table: pd.DataFrame, x: str, by: Sequence[str], level: float, kind: str
                             ) -> Figure | None:
    """One request type's throughput against x (seed 001 Figures 7-8: gets and sets apart);
    None unless the folder has both reads and writes."""
    both = all(c in table and table[c].fillna(0).gt(0).any() for c in ("throughput_get", "throughput_set"))
    if not both:
        return None
    return _line_plot(table, x, by, f"throughput_{kind}", f"{kind} throughput (requests/s)",
                      f"{kind} throughput measured on the clients", level)


def response_time_plot(
    table: pd.DataFrame, x: str, by: Sequence[str], level: float, side: str = "clients"
) -> Figure | None:
    """Mean response time (ms) against x, one line per `by` combination, CI error bars."""
    column = "response_ms" if side == "clients" else "mw_response_ms"
    return _line_plot(table, x, by, column, "Response time (ms)", f"Response time measured on the {side}", level)


_BREAKDOWN = (
    ("mw_queue_ms", "queue"),
    ("mw_service_ms", "servers (service time)"),
    ("mw_other_ms", "rest of the middleware"),
    ("network_ms", "network and clients (client − middleware)"),
)


def time_breakdown_plot(table: pd.DataFrame, x: str, by: Sequence[str], level: float) -> Figure | None:
    """Queue / servers / rest of middleware / network time against x; a panel per series."""
    if table[x].nunique() < 2 or "mw_queue_ms" not in table or table["mw_queue_ms"].notna().sum() == 0:
        return None
    series = [(label, frame) for label, frame in series_frames(table, x, by) if frame["mw_queue_ms"].notna().any()]
    series = series[:MAX_PANELS]
    columns = min(len(series), 2)
    rows = math.ceil(len(series) / columns)
    figure, axes = plt.subplots(rows, columns, figsize=(6.5 * columns, 3.8 * rows), squeeze=False, layout="constrained")
    for ax, (label, frame) in zip(axes.ravel(), series):
        frame = frame[frame["mw_queue_ms"].notna()]
        for column, name in _BREAKDOWN:
            if column in frame and frame[column].notna().any():
                _errorbar(ax, frame, x, column, name)
        if "mw_response_ms" in frame:
            _errorbar(ax, frame, x, "mw_response_ms", "middleware response time", linestyle="--")
        ax.set_title(label if by else "Time breakdown", fontsize="medium")
        ax.set_xlabel(axis_label(x))
        ax.set_ylabel("Time (ms)")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="x-small")
    for ax in axes.ravel()[len(series) :]:
        ax.set_visible(False)
    figure.suptitle(f"Where the time goes, measured on the middleware ({level:.0%} confidence intervals)")
    return figure


def percentiles_plot(percentiles: pd.DataFrame, x: str, by: Sequence[str], side: str = "clients") -> Figure | None:
    """Mean and percentiles (from merged histograms) against x; a panel per series."""
    data = percentiles[percentiles["side"] == side] if "side" in percentiles else percentiles
    if data.empty or x not in data or data[x].nunique() < 2:
        return None
    series = list(series_frames(data, x, by))[:MAX_PANELS]
    columns = min(len(series), 2)
    rows = math.ceil(len(series) / columns)
    figure, axes = plt.subplots(rows, columns, figsize=(6.5 * columns, 3.8 * rows), squeeze=False, layout="constrained")
    for ax, (label, frame) in zip(axes.ravel(), series):
        xs = frame[x].to_numpy(dtype=float)
        ax.plot(xs, frame["mean_ms"].to_numpy(dtype=float), marker="o", color="black", label="mean")
        for q, column in percentile_columns(PLOTTED_PERCENTILES).items():
            if column in frame:
                ax.plot(xs, frame[column].to_numpy(dtype=float), marker=".", label=f"{q:g}th percentile")
        ax.set_title(label if by else f"Response time on the {side}", fontsize="medium")
        ax.set_xlabel(axis_label(x))
        ax.set_ylabel("Response time (ms)")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="x-small")
    for ax in axes.ravel()[len(series) :]:
        ax.set_visible(False)
    figure.suptitle(f"Response time percentiles on the {side} (histograms merged over repetitions)")
    return figure


def histograms_plot(panels: Sequence[tuple[str, Histogram | None, Histogram | None]]) -> Figure | None:
    """One row per configuration: the clients' and the middleware's response-time
    histograms in 100 µs buckets, counts per second (already scaled by the caller)."""
    panels = [p for p in panels if (p[1] is not None and p[1]) or (p[2] is not None and p[2])][:MAX_PANELS]
    if not panels:
        return None
    figure, axes = plt.subplots(len(panels), 2, figsize=(12, 3.2 * len(panels)), squeeze=False, layout="constrained")
    upper = 0.0
    for row, (_, client, middleware) in enumerate(panels):
        for histogram in (client, middleware):
            if histogram is not None and histogram:
                upper = max(upper, histogram.percentile(99.5))
    upper = max(upper * 1.1, 2 * BUCKET_US) / 1e3
    for row, (label, client, middleware) in enumerate(panels):
        for column, (side, histogram) in enumerate((("clients", client), ("middleware", middleware))):
            ax = axes[row, column]
            if histogram is None or not histogram:
                ax.text(0.5, 0.5, f"no {side} histogram", ha="center", va="center", transform=ax.transAxes)
                ax.set_axis_off()
                continue
            widths = (histogram.upper - histogram.lower) / 1e3
            ax.bar(histogram.lower / 1e3, histogram.counts, width=widths, align="edge", edgecolor="none")
            ax.set_xlim(0, upper)
            ax.set_title(f"{label}: measured on the {side}", fontsize="small")
            ax.set_xlabel("Response time (ms), 100 µs buckets")
            ax.set_ylabel("Requests per second")
            ax.grid(True, alpha=0.3)
    figure.suptitle("Response-time histograms (merged over repetitions, per second of run)")
    return figure


def keys_per_second_plot(table: pd.DataFrame, x: str, by: Sequence[str], level: float) -> Figure | None:
    """Values (keys) read per second against x (seed 000 Figure 27)."""
    return _line_plot(
        table, x, by, "keys_throughput", "Keys read per second", "Values (keys) read per second", level
    )


def factorial_plot(variations: Mapping[str, pd.DataFrame]) -> Figure | None:
    """Horizontal bars of the percentage of variation explained by each effect and by the
    errors, one panel per response (the frames are `FactorialResult.variation_frame()`)."""
    variations = {k: v for k, v in variations.items() if v is not None and not v.empty}
    if not variations:
        return None
    columns = min(len(variations), 2)
    rows = math.ceil(len(variations) / columns)
    height = max(2.2, 0.35 * max(len(v) for v in variations.values()))
    figure, axes = plt.subplots(
        rows, columns, figsize=(6.5 * columns, height * rows), squeeze=False, layout="constrained"
    )
    for ax, (name, frame) in zip(axes.ravel(), variations.items()):
        shares = frame.drop(index=[i for i in ("SSY", "SS0", "SST") if i in frame.index])["variation_percent"]
        labels = shares.index.astype(str)
        colors = ["tab:gray" if label == "Errors" else "tab:blue" for label in labels]
        ax.barh(labels, shares.to_numpy(dtype=float), color=colors)
        ax.invert_yaxis()
        ax.set_title(name, fontsize="medium")
        ax.set_xlabel("Variation explained (%)")
        ax.set_xlim(0, 100)
        ax.grid(True, axis="x", alpha=0.3)
    for ax in axes.ravel()[len(variations) :]:
        ax.set_visible(False)
    figure.suptitle("2^k r design: allocation of variation")
    return figure


def _measured_against_predicted(
    frame: pd.DataFrame,
    x: str,
    by: Sequence[str],
    columns: tuple[str, str, str, str],
    predicted_labels: tuple[str, str],
    response_label: str,
    title: str,
) -> Figure | None:
    """Throughput (left) and response time (right) against `x`: measured solid, predicted
    dashed, one colour per series. `columns`: measured X, predicted X, measured R, predicted R."""
    if frame.empty or x not in frame or frame[x].nunique() < 2:
        return None
    measured_x, predicted_x, measured_r, predicted_r = columns
    figure, (left, right) = plt.subplots(1, 2, figsize=(12, 4), layout="constrained")
    for index, (label, rows) in enumerate(series_frames(frame, x, by)):
        color = f"C{index % 10}"
        xs = rows[x].to_numpy(dtype=float)
        dashed = {"marker": "x", "linestyle": "--", "color": color}
        left.plot(xs, rows[measured_x], marker="o", color=color, label=f"{label} measured")
        left.plot(xs, rows[predicted_x], **dashed, label=f"{label} {predicted_labels[0]}")
        right.plot(xs, rows[measured_r], marker="o", color=color, label=f"{label} measured")
        right.plot(xs, rows[predicted_r], **dashed, label=f"{label} {predicted_labels[1]}")
    left.set_ylabel("Throughput (requests/s)")
    right.set_ylabel(response_label)
    for ax in (left, right):
        ax.set_xlabel(axis_label(x))
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="x-small")
    figure.suptitle(title)
    return figure


def interactive_law_plot(frame: pd.DataFrame, x: str, by: Sequence[str]) -> Figure | None:
    """Measured X and R against what the interactive law predicts from the other one."""
    return _measured_against_predicted(
        frame,
        x,
        by,
        ("throughput", "predicted_throughput", "response_time", "predicted_response_time"),
        ("N/(R+Z)", "N/X−Z"),
        "Response time R (ms)",
        "Interactive response-time law: measured (solid) and predicted (dashed)",
    )


def model_plot(comparison: pd.DataFrame, x: str, by: Sequence[str]) -> Figure | None:
    """MVA-predicted (dashed) against measured (solid) system throughput and response time."""
    return _measured_against_predicted(
        comparison,
        x,
        by,
        ("system_throughput_measured", "system_throughput_predicted", "response_ms_measured", "response_ms_predicted"),
        ("MVA", "MVA"),
        "Response time on the clients (ms)",
        "Network of queues (MVA) against the measurements",
    )
