"""The report's "Predictions" section: demands calibrated on some configurations predict the
others (`analysis._predict`): predicted against measured with the errors, the bottleneck each
configuration's utilizations name, and the model over the population range with its asymptotic
bounds."""

from __future__ import annotations

import math

import pandas as pd

from ..analysis import predict_configurations, predictions_frame
from ..results import ResultsSummary
from ._document import Figure, Section, Table


def predictions_section(summary: ResultsSummary, notes: list[str]) -> Section | None:
    table = summary.pooled_table()
    if "cpu_total_us" not in table or not table["cpu_total_us"].notna().any():
        notes.append("no processor-time samples (cpu.json): results from an earlier lab; no predictions")
        return None
    try:
        predictions, curves = predict_configurations(table, summary.config_columns, curves=True)
    except ValueError as problem:
        notes.append(f"predictions: {problem}")
        return None
    frame = predictions_frame(predictions)
    columns = [c for c in summary.display_columns if c in frame]
    shown = frame[columns].copy()
    shown["role"] = ["calibration" if c else "predicted" for c in frame["calibration"]]
    shown["X measured"] = [
        f"{m:,.0f} ± {h:,.0f}" if math.isfinite(h) else f"{m:,.0f}"
        for m, h in zip(frame["throughput_measured"], frame["throughput_half_width"])
    ]
    shown["X model"] = [f"{v:,.0f}" for v in frame["throughput_predicted"]]
    shown["X error"] = [_pct(frame, i, "throughput") for i in range(len(frame))]
    shown["R measured (ms)"] = [f"{v:,.3f}" for v in frame["response_ms_measured"]]
    shown["R model (ms)"] = [f"{v:,.3f}" for v in frame["response_ms_predicted"]]
    shown["R error"] = [_pct(frame, i, "response_ms") for i in range(len(frame))]
    shown["bottleneck"] = frame["bottleneck"]
    predicted = frame[~frame["calibration"]]
    text = [
        "A network whose thread pools share the processors (memrelay-bench, memrelay and memcached run on the "
        "same cores): service demands are the processor time per request each program was measured to use "
        "(utilization law), the off-processor wait is solved for at the calibration configurations (the lowest "
        "and highest population of each setting of the other parameters, thread counts aside), and demands are "
        "interpolated in 1/N to the others, which the model predicts. An error of 0 means the prediction fell "
        "inside the measurement's own 95% confidence interval."
    ]
    if len(predicted):
        parts = []
        for measure, name in (("throughput", "throughput"), ("response_ms", "response time")):
            raw = (predicted[f"{measure}_predicted"] / predicted[f"{measure}_measured"] - 1).abs()
            counted = predicted[f"{measure}_error"].abs()
            parts.append(f"{name}: mean |error| {100 * raw.mean():.1f}% (worst {100 * raw.max():.1f}%), "
                         f"{100 * counted.mean():.1f}% counting predictions inside the interval as exact")
        text.append(f"Over {len(predicted)} predicted configurations, " + "; ".join(parts) + ".")
    else:
        text.append("Every configuration calibrated the model: there is nothing to predict (use `memrelay-lab model "
                    "predict --calibrate` to hold some out).")
    items: list[Table | Figure] = [Table("predictions", "Predicted against measured", shown, csv=frame)]
    figure = _curves_plot(curves, table)
    if figure is not None:
        items.append(Figure("predictions_curves", "The model over the population range against the measurements",
                            figure))
    return Section("Predictions", text, items)


def _pct(frame: pd.DataFrame, i: int, measure: str) -> str:
    """The raw relative error, marked when it falls inside the measured interval."""
    row = frame.iloc[i]
    if row["calibration"]:
        return "(calibration)"
    raw = row[f"{measure}_predicted"] / row[f"{measure}_measured"] - 1
    if not math.isfinite(raw):
        return "–"
    return f"{100 * raw:+.1f}%" + (" (in CI)" if row[f"{measure}_error"] == 0 else "")


def _curves_plot(curves: pd.DataFrame, table: pd.DataFrame) -> bytes | None:
    if curves.empty:
        return None
    from . import _plots

    plt = _plots.plt
    figure, ax = plt.subplots(figsize=(7, 4.2), layout="constrained")
    for (label, frame), color in zip(curves.groupby("series", sort=False), plt.rcParams["axes.prop_cycle"].by_key()["color"]):
        ax.plot(frame["clients"], frame["throughput"], color=color, label=f"model, {label}")
        bound = frame[[c for c in ("population_bound", "processor_bound", "link_bound") if c in frame]].min(axis=1)
        ax.plot(frame["clients"], bound, color=color, linestyle=":", alpha=0.6)
        column, value = label.split("=", 1) if "=" in label else (None, None)
        measured = table if column is None else table[table[column].astype(str) == value]
        error = measured.get("throughput_half_width")
        ax.errorbar(measured["clients"], measured["throughput"], yerr=None if error is None else error.fillna(0),
                    color=color, marker="o", linestyle="none", capsize=3, label=f"measured, {label}")
    ax.set_xlabel("clients")
    ax.set_ylabel("throughput (requests/s)")
    ax.set_title("Model (lines), bounds min(N/D, m/C, 1/D_link) (dotted), measured (95% CI)")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    return _plots.png_bytes(figure)
