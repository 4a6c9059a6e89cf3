"""The report of a results folder: ``report.html``, ``report.md`` and the tables as CSV.

``write_report(results_dir, out_dir, level=0.95)`` loads the folder (`load`), reduces it to
configurations (`_summary`), runs every analysis the data allow and writes, in ``out_dir``
(default ``<results_dir>/report``):

- ``report.html``: self-contained (figures inlined as base64 PNG, styles inline, no
  network), with a small inline script that sets ``data-images-loaded="N/M"`` on <body>
  once the page has loaded (N images decoded of M), which the browser test reads;
- ``report.md``: the same text and tables in Markdown, figures as ``figures/*.png``;
- ``tables/*.csv``: every table at full precision.

Sections (each only when the folder's data give it something to show):

1. the runs and the configurations: means over repetitions with Student-t confidence
   intervals at ``level`` (throughput summed over the bench instances; times combined over
   middlewares weighted by request count);
2. throughput and response time against clients (or the swept parameter), one line per
   value of the other swept parameters, with error bars (seed 000 §2-4);
3. the time breakdown on the middleware: queue, servers, the rest of the middleware,
   network (client minus middleware response time);
4. percentiles from histograms merged over repetitions (never averaged), against the
   multi-get size, and response-time histograms on both sides (seed 000 §5);
5. keys read per second against the multi-get size (seed 000 Figure 27);
6. the interactive response-time law, R = N/X - Z and X = N/(R + Z) beside the measured
   values, with Z = client-side minus middleware-side response time (or ``think_time_ms``
   when given, applied to the client-side response time); configurations off by more
   than ``tolerance`` are flagged;
7. a 2^k r factorial analysis when the folder is one (`_summary.factorial_factors`) of
   the clients' throughput and response time (seed 000 Tables 7-10);
8. the queueing models of `_model_builder`: the MVA network against the measurements
   (seed 000 Tables 32-33) and M/M/1, M/M/m (Tables 22-31).
"""

from __future__ import annotations

import base64
import html
import math
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ._factorial import FactorialDesignError, factorial_design
from ._histograms import merged_buckets
from ._interactive import DEFAULT_TOLERANCE, interactive_law_frame
from ._load import load
from ._model_builder import NetworkModelError, mm_tables, network_model
from ._summary import ResultsSummary, factorial_factors, summarize

__all__ = ["Report", "factorial_results", "interactive_law_table", "write_report"]


class _Plots:
    """`_plots`, imported on first use: matplotlib takes most of a second to import, which
    every `memrelay-lab` command would pay through the package's imports otherwise."""

    def __getattr__(self, name: str):
        from . import _plots

        return getattr(_plots, name)


plots = _Plots()

MAX_HISTOGRAM_PANELS = 4


@dataclass
class Table:
    name: str
    caption: str
    frame: pd.DataFrame  # as shown
    csv: pd.DataFrame | None = None  # as written (default: frame)
    index: bool = False


@dataclass
class Figure:
    name: str
    caption: str
    png: bytes


@dataclass
class Section:
    title: str
    text: list[str] = field(default_factory=list)
    items: list[Table | Figure] = field(default_factory=list)


@dataclass(frozen=True)
class Report:
    """What `write_report` wrote and how long it took."""

    out_dir: Path
    html: Path
    markdown: Path
    tables: dict[str, Path]
    figures: dict[str, Path]
    sections: tuple[str, ...]
    notes: tuple[str, ...]
    elapsed_s: float


def write_report(
    results_dir: str | Path,
    out_dir: str | Path | None = None,
    *,
    level: float = 0.95,
    tolerance: float = DEFAULT_TOLERANCE,
    think_time_ms: float | None = None,
) -> Report:
    """Analyse `results_dir` and write report.html, report.md and tables/*.csv."""
    started = time.perf_counter()
    if not 0.0 < level < 1.0:
        raise ValueError(f"confidence level must be between 0 and 1, got {level}")
    results_dir = Path(results_dir)
    out = Path(out_dir) if out_dir is not None else results_dir / "report"
    results = load(results_dir)
    summary = summarize(results, level)

    notes = list(summary.notes)
    sections = [
        _overview(results, summary),
        _configurations(summary),
        _throughput_section(summary),
        _breakdown_section(summary),
        _percentiles_section(summary),
        _keys_section(summary),
        _interactive_section(summary, tolerance, think_time_ms),
        _factorial_section(summary),
        _models_section(summary, notes),
    ]
    sections = [s for s in sections if s is not None and (s.items or s.text)]
    title = f"memrelay-lab report: {results.manifest.get('experiment', {}).get('name', results_dir.name)}"

    out.mkdir(parents=True, exist_ok=True)
    (out / "tables").mkdir(exist_ok=True)
    (out / "figures").mkdir(exist_ok=True)
    tables, figures = {}, {}
    for section in sections:
        for item in section.items:
            if isinstance(item, Table):
                path = out / "tables" / f"{item.name}.csv"
                (item.csv if item.csv is not None else item.frame).to_csv(path, index=item.index)
                tables[item.name] = path
            else:
                path = out / "figures" / f"{item.name}.png"
                path.write_bytes(item.png)
                figures[item.name] = path
    html_path = out / "report.html"
    html_path.write_text(_html(title, sections, notes), encoding="utf-8")
    md_path = out / "report.md"
    md_path.write_text(_markdown(title, sections, notes), encoding="utf-8")
    return Report(
        out_dir=out,
        html=html_path,
        markdown=md_path,
        tables=tables,
        figures=figures,
        sections=tuple(s.title for s in sections),
        notes=tuple(notes),
        elapsed_s=time.perf_counter() - started,
    )


# ---------------------------------------------------------------- sections


def _overview(results, summary: ResultsSummary) -> Section:
    experiment = results.manifest.get("experiment", {})
    status = results.status["status"].value_counts().to_dict() if not results.status.empty else {}
    counts = ", ".join(f"{n} {s}" for s, n in status.items())
    text = []
    if experiment.get("description"):
        text.append(str(experiment["description"]))
    profile = f" (profile {experiment['profile']})" if experiment.get("profile") else ""
    text.append(
        f"Results folder `{results.path}`{profile}: {len(summary.table)} configurations, runs: {counts}. "
        f"Means over repetitions with {summary.level:.0%} confidence intervals (Student t, r - 1 degrees of "
        "freedom); throughput summed over the bench instances; middleware times combined over middlewares "
        "weighted by request count; means from the windows left after trimming warm-up and cool-down."
    )
    if summary.swept:
        axis = f"; plots against {plots.axis_label(summary.x).lower()}" if summary.x else ""
        lines = f", one line per {', '.join(summary.series)}" if summary.series else ""
        text.append(f"Swept parameters: {', '.join(summary.swept)}{axis}{lines}.")
    text.append(
        "Percentiles come from histograms merged over all repetitions (and bench instances, and middlewares), "
        "never from averaged percentiles: the clients' HdrHistograms (3 significant digits) and the middlewares' "
        "100 µs buckets (interpolated inside the bucket). Histograms cover whole runs, warm-up and cool-down "
        "included."
    )
    failed = results.status[results.status["status"] != "completed"] if not results.status.empty else None
    items = []
    if failed is not None and not failed.empty:
        items.append(Table("runs_not_completed", "Runs that did not complete", failed[["run_id", "status", "reason"]]))
    return Section("Overview", text, items)


def _measure_columns(summary: ResultsSummary, columns: Sequence[str]) -> list[str]:
    table = summary.table
    chosen = []
    for column in columns:
        if column in table and table[column].notna().any():
            chosen.append(column)
            if f"{column}_half_width" in table and table[f"{column}_half_width"].notna().any():
                chosen.append(f"{column}_half_width")
    return chosen


def _configurations(summary: ResultsSummary) -> Section:
    shown = ["configuration", *summary.display_columns, "repetitions"]
    measures = _measure_columns(
        summary,
        [
            "throughput",
            "response_ms",
            "mw_throughput",
            "mw_response_ms",
            "mw_queue_ms",
            "mw_service_ms",
            "mw_other_ms",
            "network_ms",
            "mw_queue_length",
            "keys_throughput",
            "miss_rate",
            "error_rate",
        ],
    )
    frame = summary.table[shown + measures]
    text = [
        "One row per configuration. `throughput` and `response_ms` are measured on the clients, `mw_*` on the "
        "middlewares; `mw_other_ms` is the middleware's response time minus queue and service time, `network_ms` "
        "the clients' minus the middlewares' response time. `*_half_width` is the half width of the confidence "
        "interval (NaN with one repetition). Times in ms, rates per second."
    ]
    configurations = summary.table[["configuration", *summary.config_columns]]
    return Section(
        "Configurations",
        text,
        [
            Table("summary", "Means over repetitions", frame, csv=summary.table),
            Table("runs", "Every run (one row per repetition)", summary.runs.head(0), csv=summary.runs),
            Table("configurations", "Every configuration's parameters", configurations.head(0), csv=configurations),
        ],
    )


def _figure(name: str, caption: str, figure) -> Figure | None:
    if figure is None:
        return None
    return Figure(name, caption, plots.png_bytes(figure))


def _items(*items) -> list:
    return [item for item in items if item is not None]


def _throughput_section(summary: ResultsSummary) -> Section | None:
    if summary.x is None:
        return None
    x, by, level = summary.x, summary.series, summary.level
    return Section(
        "Throughput and response time",
        [
            f"Measured on the clients, against {plots.axis_label(x).lower()}; "
            f"error bars: {level:.0%} confidence intervals."
        ],
        _items(
            _figure("throughput", "Throughput", plots.throughput_plot(summary.table, x, by, level)),
            _figure("response_time", "Response time", plots.response_time_plot(summary.table, x, by, level)),
        ),
    )


def _breakdown_section(summary: ResultsSummary) -> Section | None:
    if summary.x is None:
        return None
    figure = plots.time_breakdown_plot(summary.table, summary.x, summary.series, summary.level)
    if figure is None:
        return None
    return Section(
        "Time breakdown",
        [
            "Where a request's time goes: waiting in memrelay's request queue, at the servers (service time), in "
            "the rest of the middleware (net thread, routing, writing the reply) and outside it (network both ways "
            "and the client; client-side minus middleware-side response time)."
        ],
        _items(_figure("time_breakdown", "Time breakdown", figure)),
    )


def _percentiles_section(summary: ResultsSummary) -> Section | None:
    percentiles = summary.percentiles
    if percentiles.empty:
        return None
    shown = ["configuration", *summary.display_columns, "side", "requests", "mean_ms"]
    shown += [c for c in percentiles.columns if re.fullmatch(r"p[0-9_]+_ms", c)]
    items: list = [Table("percentiles", "Response time percentiles from merged histograms (ms)", percentiles[shown])]
    if "multiget" in summary.swept:
        by = [c for c in summary.display_columns if c != "multiget"]
        items += _items(
            _figure(
                "percentiles_clients",
                "Percentiles on the clients against the multi-get size",
                plots.percentiles_plot(percentiles, "multiget", by, "clients"),
            ),
            _figure(
                "percentiles_middleware",
                "Percentiles on the middleware against the multi-get size",
                plots.percentiles_plot(percentiles, "multiget", by, "middleware"),
            ),
        )
    panels = []
    for configuration in _histogram_choices(summary):
        row = summary.table.loc[summary.table["configuration"] == configuration].iloc[0]
        run_ids = summary.run_ids(configuration)
        runs = summary.runs[summary.runs["configuration"] == configuration]
        client = merged_buckets(summary.results, run_ids, "clients")
        client_seconds = float(runs["duration_s"].sum())
        client = client.scaled(1.0 / client_seconds) if client and client_seconds > 0 else client
        middleware = None
        if runs["mw_response_ms"].notna().any():
            middleware = merged_buckets(summary.results, run_ids, "middleware")
            mw_seconds = float(runs["mw_duration_s"].sum())
            middleware = middleware.scaled(1.0 / mw_seconds) if middleware and mw_seconds > 0 else middleware
        panels.append((summary.label(row), client, middleware))
    items += _items(
        _figure("histograms", "Response-time histograms, clients and middleware", plots.histograms_plot(panels))
    )
    return Section(
        "Percentiles and histograms",
        [
            "Percentiles read from the histograms of all repetitions merged. Histograms: 100 µs buckets, requests "
            "per second of run (counts divided by the runs' total duration), for "
            + ("the middle multi-get size" if "multiget" in summary.swept else "the most loaded configuration")
            + " of each series."
        ],
        items,
    )


def _histogram_choices(summary: ResultsSummary) -> list[int]:
    table = summary.table
    if "multiget" in summary.swept:
        sizes = sorted(table["multiget"].unique())
        chosen = table[table["multiget"] == sizes[(len(sizes) - 1) // 2]]
    else:
        chosen = table
    by = [c for c in summary.series if c != "multiget" and c in chosen]
    key = summary.x if summary.x in chosen and summary.x != "multiget" else "clients"
    picks = []
    groups = chosen.groupby(by, sort=True, dropna=False) if by else [(None, chosen)]
    for _, group in groups:
        picks.append(int(group.sort_values(key).iloc[-1]["configuration"]))
    return picks[:MAX_HISTOGRAM_PANELS]


def _keys_section(summary: ResultsSummary) -> Section | None:
    if "multiget" not in summary.swept or "keys_throughput" not in summary.table:
        return None
    by = [c for c in summary.display_columns if c != "multiget"]
    figure = plots.keys_per_second_plot(summary.table, "multiget", by, summary.level)
    if figure is None:
        return None
    return Section(
        "Values read per second",
        ["Keys asked for by get and multi-get requests per second, on the clients (seed 000 Figure 27)."],
        _items(_figure("keys_per_second", "Keys read per second", figure)),
    )


def interactive_law_table(
    summary: ResultsSummary, tolerance: float = DEFAULT_TOLERANCE, think_time_ms: float | None = None
) -> pd.DataFrame:
    """The interactive law for every configuration (ms and requests per second)."""
    table = summary.pooled_table()
    usable = pd.Series(True, index=table.index)
    for column in ("throughput", "response_ms"):
        usable &= np.isfinite(table[column].to_numpy(dtype=float)) & (table[column].to_numpy(dtype=float) > 0)
    table = table[usable]
    base = table[["configuration", *summary.display_columns]].copy()
    base["clients"] = table["clients"].astype(float)
    base["throughput"] = table["throughput"]
    has_mw = table["mw_response_ms"].notna() if "mw_response_ms" in table else pd.Series(False, index=table.index)
    parts = []
    if think_time_ms is not None:
        frame = base.assign(response_time=table["response_ms"], measured_on="clients")
        parts.append(interactive_law_frame(frame, think_time=float(think_time_ms), tolerance=tolerance, time_unit="ms"))
        z_source = "given"
    else:
        z_source = None
        if has_mw.any():
            frame = base[has_mw].assign(
                response_time=table.loc[has_mw, "mw_response_ms"],
                client_response_time=table.loc[has_mw, "response_ms"],
                measured_on="middleware",
            )
            parts.append(
                interactive_law_frame(
                    frame, client_response_time="client_response_time", tolerance=tolerance, time_unit="ms"
                ).drop(columns=["client_response_time"])
            )
        if (~has_mw).any():
            frame = base[~has_mw].assign(response_time=table.loc[~has_mw, "response_ms"], measured_on="clients")
            parts.append(interactive_law_frame(frame, think_time=0.0, tolerance=tolerance, time_unit="ms"))
    result = pd.concat(parts).sort_values("configuration") if parts else pd.DataFrame()
    if not result.empty:
        result["think_time_from"] = z_source or np.where(
            result["measured_on"] == "middleware", "client - middleware response time", "0 (closed loop)"
        )
    return result


def _interactive_section(summary: ResultsSummary, tolerance: float, think_time_ms: float | None) -> Section | None:
    frame = interactive_law_table(summary, tolerance, think_time_ms)
    if frame.empty:
        return None
    flagged = frame[~frame["consistent"]]
    text = [
        "R = N/X − Z and X = N/(R + Z) next to the measured values (N clients, X the clients' total "
        "throughput, its mean over repetitions; response times averaged over the same requests, i.e. weighted "
        "by each repetition's request count). "
        + (
            f"Z = {think_time_ms:g} ms (given), R measured on the clients."
            if think_time_ms is not None
            else "Where there is a middleware, R is its response time and Z the clients' minus the middleware's "
            "response time (seeds 000, 004); without middleware Z = 0 (the bench has no think time)."
        )
        + f" A configuration is flagged when a prediction is more than {tolerance:.0%} off.",
        f"Flagged: {len(flagged)} of {len(frame)} configurations."
        + (" " + "; ".join(summary.label(r) for _, r in flagged.iterrows()) if len(flagged) else ""),
    ]
    return Section(
        "Interactive response-time law",
        text,
        _items(
            Table("interactive_law", "Interactive law: measured and predicted (ms, requests/s)", frame),
            _figure(
                "interactive_law",
                "Interactive law",
                plots.interactive_law_plot(frame, summary.x, summary.series) if summary.x else None,
            ),
        ),
    )


RESPONSES = (("throughput", "throughput (requests/s)"), ("response_ms", "response time (ms)"))


def factorial_results(summary: ResultsSummary) -> dict[str, object]:
    """2^k r analyses of the clients' throughput and response time, keyed by a label
    "<response>" or "<response>, <slice>" (empty when the folder is no such design)."""
    plan, _ = factorial_factors(summary)
    if plan is None:
        return {}
    analyses = {}
    for where, configurations in plan.slices:
        runs = summary.runs[summary.runs["configuration"].isin(configurations)]
        suffix = ", ".join(f"{k}={_plain(v)}" for k, v in where.items())
        for response, label in RESPONSES:
            data = runs[[*plan.factors, response]].dropna()
            try:
                result = factorial_design(data, plan.factors, response, level=summary.level)
            except FactorialDesignError:
                continue
            analyses[f"{label}, {suffix}" if suffix else label] = result
    return analyses


def _factorial_section(summary: ResultsSummary) -> Section | None:
    plan, reason = factorial_factors(summary)
    if plan is None:
        return Section("2^k r factorial design", [f"Not analysed: {reason}."]) if summary.swept else None
    analyses = factorial_results(summary)
    if not analyses:
        return Section("2^k r factorial design", [f"Not analysed: a {reason}, but without complete measurements."])
    text = [
        f"A {reason} with factors {', '.join(plan.factors)} (levels: "
        + "; ".join(f"{f}: {', '.join(map(str, sorted(summary.runs[f].unique())))}" for f in plan.factors)
        + "), additive model, on the clients' measurements (seed 000 §6). The last row of the sign table holds "
        "the effects q; an effect is significant when its confidence interval excludes 0."
    ]
    items: list = []
    for label, result in analyses.items():
        slug = _slug(label.replace("(requests/s)", "").replace("(ms)", "")).replace("-", "_")
        items += [
            Table(f"factorial_{slug}_signs", f"Sign table and effects: {label}", result.sign_table_frame(), index=True),
            Table(
                f"factorial_{slug}_variation", f"Allocation of variation: {label}", result.variation_frame(), index=True
            ),
            Table(
                f"factorial_{slug}_effects",
                f"Effects with {summary.level:.0%} confidence intervals: {label}",
                result.effects_frame(),
                index=True,
            ),
        ]
    items += _items(
        _figure(
            "factorial_variation",
            "Variation explained",
            plots.factorial_plot({label: r.variation_frame() for label, r in analyses.items()}),
        )
    )
    return Section("2^k r factorial design", text, items)


def _models_section(summary: ResultsSummary, notes: list[str]) -> Section | None:
    table = summary.pooled_table()
    if "middlewares" not in table or not (table["middlewares"].fillna(0) > 0).any():
        return None
    columns = summary.display_columns
    try:
        model = network_model(table, config_columns=columns)
        single = mm_tables(table, config_columns=columns)
    except NetworkModelError as error:
        return Section("Queueing models", [f"Not built: {error}."])
    seed = network_model(table, config_columns=columns, variant="seed")
    comparison = model.comparison.copy()
    comparison["system_throughput_seed_variant"] = seed.comparison["system_throughput_predicted"]
    text = [
        "Network of queues per middleware, solved with exact MVA for the measured population (seed 000 §7.4): "
        "the net thread a single-server queue, the worker pool an m-server center (m = worker threads) whose "
        "demand includes the servers' time (a pool worker blocks while the servers answer), the servers a delay "
        "inside it and the network (client minus middleware response time) a delay center; demands from each "
        "configuration's own measurements (times weighted by request count over the repetitions). "
        "`system_throughput_seed_variant` is the seed's series model (servers "
        "as a separate delay center after the workers) for comparison. The bottleneck is the center with the "
        "highest predicted utilization. Times in ms.",
        "Bottlenecks: "
        + "; ".join(f"{summary.label(r, columns)}: {r['bottleneck']}" for _, r in comparison.iterrows())
        + ".",
    ]
    for note in model.notes:
        notes.append(f"MVA model: {note}")
    wide = _metric_table(model)
    demand_columns = [*columns, "population"] + [
        "net_thread_ms", "workers_own_ms", "servers_ms", "network_ms", "workers_demand_ms"
    ]
    demands = model.demands[[c for c in demand_columns if c in model.demands]]
    items: list = [
        Table("mva_demands", "Service demands per middleware (ms)", demands),
        Table("mva_comparison", "MVA predicted against measured (seed 000 Tables 32-33)", wide, csv=comparison,
              index=True),
    ]
    x = summary.x if summary.x in comparison else None
    if x is not None:
        series = [c for c in summary.series if c in comparison]
        items += _items(_figure("mva", "MVA against measurements", plots.model_plot(comparison, x, series)))
    text.append(
        "M/M/1 and M/M/m per middleware: λ = measured middleware throughput per middleware, service time "
        "S = middleware response time − queue time, m = worker threads, μ = 1/S per worker (M/M/1: m/S). "
        "ρ ≥ 1: no steady state (n/a)."
    )
    items.append(Table("mm_comparison", "M/M/1 and M/M/m against measured (seed 000 Table 31; ms)", single.comparison))
    items.append(Table("mm1", "M/M/1 model (seed 000 Tables 22-25)", single.wide("mm1"), csv=single.mm1, index=True))
    items.append(Table("mmm", "M/M/m model (seed 000 Tables 27-30)", single.wide("mmm"), csv=single.mmm, index=True))
    return Section("Queueing models", text, items)


def _metric_table(model) -> pd.DataFrame:
    """Metrics as rows (predicted, measured), configurations as columns."""
    columns = {}
    for _, row in model.comparison.iterrows():
        label = ", ".join(f"{c}={_plain(row[c])}" for c in model.config_columns) or "all"
        values = {}
        for metric, name in model.METRICS:
            values[(name, "predicted")] = row[f"{metric}_predicted"]
            values[(name, "measured")] = row[f"{metric}_measured"]
        columns[label] = values
    frame = pd.DataFrame(columns)
    frame.index = [f"{name} — {kind}" for name, kind in frame.index]
    return frame


def _plain(value):
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return int(value)
    if isinstance(value, np.generic):
        return value.item()
    return value


# ---------------------------------------------------------------- output formats


FLAG_COLUMNS = ("consistent", "stable")
FLAG = "NO"


def _cell(value, column: object = None) -> str:
    if value is None:
        return "–"
    if isinstance(value, (bool, np.bool_)):
        if column in FLAG_COLUMNS:
            return "yes" if value else FLAG
        return "true" if value else "false"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        value = float(value)
        if math.isnan(value):
            return "–"
        if math.isinf(value):
            return "∞"
        if value.is_integer() and abs(value) < 1e9:
            return str(int(value))
        return f"{value:.4g}"
    return str(value)


def _rows(frame: pd.DataFrame, index: bool) -> tuple[list[str], list[list[str]]]:
    header = ([str(frame.index.name or "")] if index else []) + [str(c) for c in frame.columns]
    rows = []
    for label, row in frame.iterrows():
        cells = [_cell(v, c) for c, v in zip(frame.columns, row.tolist())]
        rows.append(([_cell(label)] if index else []) + cells)
    return header, rows


_CSS = """
body { font-family: system-ui, -apple-system, 'Segoe UI', sans-serif; margin: 2em auto; max-width: 1200px;
       padding: 0 1em; color: #222; line-height: 1.45; }
h1 { font-size: 1.6em; } h2 { margin-top: 2em; border-bottom: 1px solid #ccc; padding-bottom: .2em; }
.scroll { overflow-x: auto; margin: 1em 0; }
table { border-collapse: collapse; font-size: 12px; }
th, td { border: 1px solid #ddd; padding: 3px 6px; text-align: right; white-space: nowrap; }
th { background: #f2f2f2; } td:first-child, th:first-child { text-align: left; }
td.flag { background: #fdd; font-weight: bold; }
caption { caption-side: top; text-align: left; font-weight: bold; padding: 4px 0; }
figure { margin: 1.5em 0; } figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: .9em; color: #555; }
.notes { background: #fffbe6; border: 1px solid #f0e0a0; padding: .5em 1em; }
code { background: #f4f4f4; padding: 0 .2em; }
"""

_IMAGES_LOADED_SCRIPT = """
window.addEventListener('load', function () {
  var images = document.images, loaded = 0;
  for (var i = 0; i < images.length; i++) {
    if (images[i].complete && images[i].naturalWidth > 0) loaded++;
  }
  document.body.setAttribute('data-images-loaded', loaded + '/' + images.length);
});
"""


def _inline_markup(text: str) -> str:
    escaped = html.escape(text)
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _html(title: str, sections: list[Section], notes: list[str]) -> str:
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head>",
        '<body data-images-loaded="pending">',
        f"<h1>{html.escape(title)}</h1>",
        "<nav><ol>"
        + "".join(f'<li><a href="#{_slug(s.title)}">{html.escape(s.title)}</a></li>' for s in sections)
        + "</ol></nav>",
    ]
    if notes:
        parts.append('<div class="notes"><strong>Notes</strong><ul>')
        parts += [f"<li>{_inline_markup(n)}</li>" for n in notes]
        parts.append("</ul></div>")
    for section in sections:
        parts.append(f'<section id="{_slug(section.title)}"><h2>{html.escape(section.title)}</h2>')
        parts += [f"<p>{_inline_markup(paragraph)}</p>" for paragraph in section.text]
        for item in section.items:
            if isinstance(item, Figure):
                data = base64.b64encode(item.png).decode("ascii")
                parts.append(
                    f'<figure><img alt="{html.escape(item.caption)}" src="data:image/png;base64,{data}">'
                    f"<figcaption>{html.escape(item.caption)}</figcaption></figure>"
                )
            elif not item.frame.empty:
                parts.append(_html_table(item))
            else:
                parts.append(f"<p>{html.escape(item.caption)}: <code>tables/{item.name}.csv</code></p>")
        parts.append("</section>")
    parts.append(f"<script>{_IMAGES_LOADED_SCRIPT}</script>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _html_table(item: Table) -> str:
    header, rows = _rows(item.frame, item.index)
    out = [f'<div class="scroll"><table><caption>{html.escape(item.caption)} '
           f'<small>(<code>tables/{item.name}.csv</code>)</small></caption>']
    out.append("<thead><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr></thead><tbody>")
    flagged = {i for i, name in enumerate(header) if name in FLAG_COLUMNS}
    for row in rows:
        cells = "".join(
            f'<td class="flag">{html.escape(c)}</td>' if i in flagged and c == FLAG else f"<td>{html.escape(c)}</td>"
            for i, c in enumerate(row)
        )
        out.append(f"<tr>{cells}</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def _markdown(title: str, sections: list[Section], notes: list[str]) -> str:
    lines = [f"# {title}", ""]
    if notes:
        lines += ["**Notes**", ""] + [f"- {n}" for n in notes] + [""]
    for section in sections:
        lines += [f"## {section.title}", ""]
        for paragraph in section.text:
            lines += [paragraph, ""]
        for item in section.items:
            if isinstance(item, Figure):
                lines += [f"![{item.caption}](figures/{item.name}.png)", ""]
            elif item.frame.empty:
                lines += [f"{item.caption}: `tables/{item.name}.csv`", ""]
            else:
                header, rows = _rows(item.frame, item.index)
                lines += [f"**{item.caption}** (`tables/{item.name}.csv`)", ""]
                lines.append("| " + " | ".join(_md_escape(h) for h in header) + " |")
                lines.append("|" + "|".join("---" for _ in header) + "|")
                lines += ["| " + " | ".join(_md_escape(c) for c in row) + " |" for row in rows]
                lines.append("")
    return "\n".join(lines)


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
