"""The report's "Gets and sets" section for mixed workloads (`analysis._mixed`): each type's
throughput, mean response time and percentiles, and their response times against the swept
parameter."""

from __future__ import annotations

from ..analysis import mixed_workload_table
from ..results import ResultsSummary
from ._document import Figure, Section, Table
from ._format import format_interval, format_number


def mixed_section(summary: ResultsSummary) -> Section | None:
    frame = mixed_workload_table(summary)
    if frame is None:
        return None
    repetitions = dict(zip(summary.table["configuration"], summary.table["repetitions"]))
    shown = frame[list(summary.display_columns)].copy()
    for kind in ("get", "set"):
        for measure, label in ((f"throughput_{kind}", f"X {kind} (req/s)"), (f"response_{kind}_ms", f"R {kind} (ms)")):
            shown[label] = [
                format_interval(m, h, measure, int(repetitions[c]))
                for m, h, c in zip(frame[measure], frame[f"{measure}_half_width"], frame["configuration"])
            ]
        shown[f"{kind} p50/p90/p99 (ms)"] = [
            " / ".join(format_number(v, "ms") for v in values)
            for values in zip(*(frame[f"response_{kind}_{q}_ms"] for q in ("p50", "p90", "p99")))
        ]
    text = [
        "Gets and sets apart (seed 001 §2–3, seed 000 §6): a set goes to every replica and a get to one server, so "
        "the mix's mean hides two response times. Means over repetitions with their intervals; percentiles from "
        "the clients' per-type HdrHistograms merged over the repetitions (whole runs)."
    ]
    items: list[Table | Figure] = [Table("mixed_workload", "Gets and sets per configuration", shown, csv=frame)]
    figure = _plot(frame, summary)
    if figure is not None:
        items.append(figure)
    return Section("Gets and sets", text, items)


def _plot(frame, summary: ResultsSummary) -> Figure | None:
    x = summary.x
    if x is None or x not in frame or frame[x].nunique() < 2:
        return None
    from . import _plots

    plt = _plots.plt
    figure, ax = plt.subplots(figsize=(7, 4.2), layout="constrained")
    groups = frame.groupby(list(summary.series), sort=True) if summary.series else [("all", frame)]
    for key, group in groups:
        label = _plots.series_label(dict(zip(summary.series, key if isinstance(key, tuple) else (key,)))) \
            if summary.series else ""
        group = group.sort_values(x)
        for kind, marker in (("get", "o"), ("set", "s")):
            ax.errorbar(group[x], group[f"response_{kind}_ms"], yerr=group[f"response_{kind}_ms_half_width"].fillna(0),
                        marker=marker, capsize=3, label=f"{kind} {label}".strip())
    ax.set_xlabel(_plots.axis_label(x))
    ax.set_ylabel("response time (ms)")
    ax.set_title(f"Gets and sets: mean response time ({summary.level:.0%} CI)")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    return Figure("mixed_workload", "Response time of gets and of sets", _plots.png_bytes(figure))
