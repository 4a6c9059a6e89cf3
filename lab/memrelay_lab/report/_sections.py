"""The sections of a report, each built from a `ResultsSummary` and the analyses of it.

Each function returns a `Section` (or None when the folder's data give it nothing to show);
`_write` lists them in order.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..analysis import (
    NetworkModelError,
    factorial_factors,
    factorial_results,
    interactive_law_table,
    mm_tables,
    model_metric_table,
    link_columns,
    named_bottlenecks,
    network_model,
    response_statistics,
)
from ..results import ResultsSummary, merged_buckets
from ._document import Figure, Section, Table
from ._format import CI_TARGET, WIDE_MARK, format_interval, interval_warning
from ._machines_section import machines_overview
from ._render import slug


class _Plots:
    """`_plots`, imported on first use: matplotlib takes most of a second to import, which
    every `memrelay-lab` command would pay through the package's imports otherwise."""

    def __getattr__(self, name: str):
        from . import _plots

        return getattr(_plots, name)


plots = _Plots()

MAX_HISTOGRAM_PANELS = 4
MAX_WIDE_CONFIGURATIONS = 4


def overview(results, summary: ResultsSummary) -> Section:
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
    sizes = summary.runs["value_size"].dropna().unique() if "value_size" in summary.runs else []
    machines_text, machines_tables = machines_overview(results.manifest, int(sizes[0]) if len(sizes) == 1 else None)
    text += machines_text
    failed = results.status[results.status["status"] != "completed"] if not results.status.empty else None
    items: list = [*machines_tables]
    if failed is not None and not failed.empty:
        items.append(Table("runs_not_completed", "Runs that did not complete", failed[["run_id", "status", "reason"]]))
    return Section("Overview", text, items)


# The configuration table split by concern, so that each fits a page: (table name, caption,
# measures shown as "mean ± half width").
_CONCERNS = (
    ("summary_throughput", "Throughput (requests/s; keys read/s)", ("throughput", "mw_throughput", "keys_throughput")),
    ("summary_response_time", "Response time (ms), clients and middleware", ("response_ms", "mw_response_ms")),
    (
        "summary_breakdown",
        "Where the middleware's time goes (ms) and its queue length",
        ("mw_queue_ms", "mw_service_ms", "mw_other_ms", "network_ms", "mw_queue_length"),
    ),
    ("summary_errors", "Misses and errors (fraction of requests)", ("miss_rate", "error_rate")),
)


def interval_frame(summary: ResultsSummary, measures: Sequence[str]) -> pd.DataFrame:
    """The configurations with one "mean ± half width" text column per measure (those with data)."""
    table = summary.table
    frame = table[["configuration", *summary.display_columns, "repetitions"]].copy()
    for measure in measures:
        if measure not in table or not table[measure].notna().any():
            continue
        half = table.get(f"{measure}_half_width", pd.Series(np.nan, index=table.index))
        frame[measure] = [
            format_interval(m, h, measure, int(r)) for m, h, r in zip(table[measure], half, table["repetitions"])
        ]
    return frame


def configurations(summary: ResultsSummary) -> Section:
    target = f"{CI_TARGET:.0%}"
    text = [
        "One row per configuration, one table per concern. `throughput` and `response_ms` are measured on the "
        "clients, `mw_*` on the middlewares; `mw_other_ms` is the middleware's response time minus queue and "
        "service time, `network_ms` the clients' minus the middlewares' response time. Each cell is the mean "
        f"over repetitions ± the half width of its {summary.level:.0%} confidence interval. "
        f"{WIDE_MARK} marks an interval whose half width exceeds {target} of the mean (the target of these "
        "tables; the percentage is the half width relative to the mean): too wide to support a comparison, "
        "add repetitions or lengthen the runs. With one repetition there is no interval (\"no interval\").",
    ]
    if (summary.table["repetitions"] < 2).any():
        text.append(
            f"{WIDE_MARK} Some configurations have repetitions = 1: their means come without confidence intervals."
        )
    items: list = []
    for name, caption, measures in _CONCERNS:
        frame = interval_frame(summary, measures)
        if len(frame.columns) > len(summary.display_columns) + 2:
            items.append(Table(name, caption, frame))
    wide = sum(cell.count(WIDE_MARK) for item in items for column in item.frame.columns[2:]
               for cell in item.frame[column].astype(str))
    if wide:
        text.append(f"{WIDE_MARK} {wide} intervals are wider than {target} of their mean.")
    configurations_frame = summary.table[["configuration", *summary.config_columns]]
    items += [
        Table("summary", "Means and half widths at full precision", summary.table.head(0), csv=summary.table),
        Table("runs", "Every run (one row per repetition)", summary.runs.head(0), csv=summary.runs),
        Table(
            "configurations", "Every configuration's parameters", configurations_frame.head(0),
            csv=configurations_frame,
        ),
    ]
    return Section("Configurations", text, items)


_MM_COMPARED = (
    ("response time (ms)", "response_ms"),
    ("variance of response time (ms²)", "var_response_ms2"),
    ("waiting time (ms)", "waiting_time_ms"),
    ("jobs in the queue", "queue_length"),
    ("jobs in the system", "jobs_in_system"),
)


def _mm_long(comparison: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """One row per configuration and metric: M/M/1, M/M/m and measured side by side."""
    rows = []
    for row in comparison.to_dict(orient="records"):
        for label, key in _MM_COMPARED:
            rows.append({**{c: row[c] for c in columns if c in comparison}, "metric": label,
                         "M/M/1": row[f"{key}_mm1"], "M/M/m": row[f"{key}_mmm"], "measured": row[f"{key}_measured"]})
    return pd.DataFrame(rows)


def _wide_note(summary: ResultsSummary, measures: Sequence[str]) -> str:
    """" ⚠ N of M error bars ..." when some plotted intervals are wider than the target."""
    table, wide, total = summary.table, 0, 0
    for measure in measures:
        if measure not in table or f"{measure}_half_width" not in table:
            continue
        for mean, half in zip(table[measure], table[f"{measure}_half_width"]):
            if np.isfinite(mean):
                total += 1
                wide += bool(interval_warning(mean, half))
    if not wide:
        return ""
    return (f" {WIDE_MARK} {wide} of these {total} intervals have a half width above {CI_TARGET:.0%} of the mean "
            "(or none, with one repetition): differences between those points are not established.")


def _with_interval_notes(effects: pd.DataFrame) -> pd.DataFrame:
    """The effects with a column ``interval`` warning where the half width exceeds the target."""
    half = (effects["ci_high"] - effects["ci_low"]) / 2
    notes = [interval_warning(q, h) for q, h in zip(effects["q"], half)]
    return effects.assign(interval=notes)


def _figure(name: str, caption: str, figure) -> Figure | None:
    if figure is None:
        return None
    return Figure(name, caption, plots.png_bytes(figure))


def _items(*items) -> list:
    return [item for item in items if item is not None]


def throughput_section(summary: ResultsSummary) -> Section | None:
    if summary.x is None:
        return None
    x, by, level = summary.x, summary.series, summary.level
    return Section(
        "Throughput and response time",
        [
            f"Measured on the clients, against {plots.axis_label(x).lower()}; "
            f"error bars: {level:.0%} confidence intervals." + _wide_note(summary, ("throughput", "response_ms"))
        ],
        _items(
            _figure("throughput", "Throughput", plots.throughput_plot(summary.table, x, by, level)),
            _figure("response_time", "Response time", plots.response_time_plot(summary.table, x, by, level)),
            *(_figure(f"throughput_{kind}", f"{kind} throughput (seed 001 Figures 7-8)",
                      plots.throughput_per_type_plot(summary.table, x, by, level, kind)) for kind in ("get", "set")),
        ),
    )


def breakdown_section(summary: ResultsSummary) -> Section | None:
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


def percentiles_section(summary: ResultsSummary) -> Section | None:
    percentiles = summary.percentiles
    if percentiles.empty:
        return None
    shown = ["configuration", *summary.display_columns, "side", "requests", "mean_ms"]
    shown += [c for c in percentiles.columns if re.fullmatch(r"p[0-9_]+_ms", c)]
    items: list = [Table("percentiles", "Response time percentiles from merged histograms (ms)", percentiles[shown])]
    statistics = response_statistics(summary)
    if statistics is not None:
        items.append(Table("response_time_statistics", "Response time statistics and throughput on the clients, "
                           "all requests and, with reads and writes, gets and sets apart (seed 001 Tables 1-3 and "
                           "5-6: mean, percentiles and standard deviation in ms; throughput in requests/s)",
                           statistics))
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
            + (f"multi-gets of {histogram_multiget(summary.table['multiget'])} keys (seed 000 §5.3, Figure 26: 6 keys; "
               "the middle size when 6 was not run)" if "multiget" in summary.swept
               else "the most loaded configuration")
            + " of each series."
        ],
        items,
    )


# Seed 000 §5.3 (Figure 26) shows the histograms of multi-gets of 6 keys.
SEED_HISTOGRAM_MULTIGET = 6


def histogram_multiget(sizes) -> int:
    """The multi-get size whose histograms the report shows: the seed's 6 keys when it was run,
    else the middle size."""
    sizes = sorted(int(k) for k in set(sizes))
    return SEED_HISTOGRAM_MULTIGET if SEED_HISTOGRAM_MULTIGET in sizes else sizes[(len(sizes) - 1) // 2]


def _histogram_choices(summary: ResultsSummary) -> list[int]:
    table = summary.table
    if "multiget" in summary.swept:
        chosen = table[table["multiget"] == histogram_multiget(table["multiget"])]
    else:
        chosen = table
    by = [c for c in summary.series if c != "multiget" and c in chosen]
    key = summary.x if summary.x in chosen and summary.x != "multiget" else "clients"
    picks = []
    groups = chosen.groupby(by, sort=True, dropna=False) if by else [(None, chosen)]
    for _, group in groups:
        picks.append(int(group.sort_values(key).iloc[-1]["configuration"]))
    return picks[:MAX_HISTOGRAM_PANELS]


def keys_section(summary: ResultsSummary) -> Section | None:
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


def interactive_section(summary: ResultsSummary, tolerance: float, think_time_ms: float | None) -> Section | None:
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
        + " Z = N/X − R is the think time the law solves for with R measured on the clients (seed 002 "
        "Table 5): close to 0 for the bench, which does not think; what it is above 0 is time the clients' "
        "R does not count."
        + f" A configuration is flagged when a prediction is more than {tolerance:.0%} off.",
        f"Flagged: {len(flagged)} of {len(frame)} configurations."
        + (" " + "; ".join(summary.label(r) for _, r in flagged.iterrows()) if len(flagged) else ""),
    ]
    return Section(
        "Interactive response-time law",
        text,
        _items(
            Table(
                "interactive_law",
                "Interactive law: measured and predicted (ms, requests/s; deviations relative to the measured)",
                frame[[c for c in frame.columns if c != "think_time_from" and frame[c].astype(str).nunique() > 1
                       or c in ("configuration", "throughput", "response_time", "think_time_law", "consistent")]],
                csv=frame,
                units={"response_time": "ms", "think_time": "ms", "think_time_law": "ms",
                       "predicted_response_time": "ms",
                       "predicted_throughput": "rate", "response_time_deviation": "relative",
                       "throughput_deviation": "relative"},
            ),
            _figure(
                "interactive_law",
                "Interactive law",
                plots.interactive_law_plot(frame, summary.x, summary.series) if summary.x else None,
            ),
        ),
    )


def factorial_section(summary: ResultsSummary) -> Section | None:
    plan, reason = factorial_factors(summary)
    if plan is None:
        return Section("2^k r factorial design", [f"Not analysed: {reason}."]) if summary.swept else None
    analyses = factorial_results(summary)
    if not analyses:
        return Section("2^k r factorial design", [f"Not analysed: a {reason}, but without complete measurements."])
    levels = next(iter(analyses.values())).levels  # each factor's (low, high), coded -1 and +1
    text = [
        f"A {reason} with factors {', '.join(plan.factors)} (levels, low and high: "
        + "; ".join(f"{f}: {low} and {high}" for f, (low, high) in levels.items())
        + "), additive model, on the clients' measurements (seed 000 §6, Tables 7-20; a read-write workload's "
        "writes and reads also get a design each, Tables 17-20). The last row of the sign table holds "
        "the effects q; an effect is significant when its confidence interval excludes 0. "
        f"`interval`: {WIDE_MARK} where the interval's half width exceeds {CI_TARGET:.0%} of the effect."
    ]
    items: list = []
    for label, result in analyses.items():
        name = slug(label.replace("(requests/s)", "").replace("(ms)", "")).replace("-", "_")
        unit = "ms" if "(ms)" in label else "rate"
        signs = result.sign_table_frame()
        # Squares of the response's unit: no unit of their own; percentages with two decimals.
        variation_units = {"sum_of_squares": "plain", "variation_percent": "percent"}
        items += [
            Table(f"factorial_{name}_signs", f"Sign table and effects: {label}", signs, index=True,
                  units={c: unit for c in signs.columns if str(c).startswith("y_")}, row_units={"q": unit}),
            Table(
                f"factorial_{name}_variation", f"Allocation of variation: {label}", result.variation_frame(),
                index=True, unit=unit, units=variation_units,
            ),
            Table(
                f"factorial_{name}_effects",
                f"Effects with {summary.level:.0%} confidence intervals: {label}",
                _with_interval_notes(result.effects_frame()),
                index=True,
                unit=unit,
                units=variation_units,
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


def _with_highest_repetition(table: pd.DataFrame, summary: ResultsSummary) -> pd.DataFrame:
    """The table with ``mw_throughput_max``: each configuration's highest repetition (seed 000's peak)."""
    runs = summary.runs
    if "mw_throughput" not in runs or "configuration" not in runs or "configuration" not in table:
        return table
    highest = runs.groupby("configuration")["mw_throughput"].max()
    return table.assign(mw_throughput_max=table["configuration"].map(highest))


def models_section(summary: ResultsSummary, notes: list[str]) -> Section | None:
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
    # One bottleneck per configuration in the whole report: the shared-processor model's (the
    # Predictions section's), which has the processors, the thread pools and the links in it;
    # this network's own busiest centre is kept beside it.
    named = named_bottlenecks(table, summary.config_columns, columns)
    comparison["busiest_mva_centre"] = comparison["bottleneck"]
    if named:
        comparison["bottleneck"] = [named.get(tuple(str(r[c]) for c in columns), r["bottleneck"])
                                    for _, r in comparison.iterrows()]
    text = [
        "Network of queues per middleware, solved with exact MVA for the measured population (seed 000 §7.4): "
        "the net thread a single-server queue, the worker pool an m-server center (m = worker threads) whose "
        "demand includes the servers' time (a pool worker blocks while the servers answer), the servers a delay "
        "inside it and the network (client minus middleware response time) a delay center; the links whose "
        "rate is known (each host's busier direction, `link to H` or `link from H`, demand bytes per request / "
        "rate) are one queue, the busiest link's: shaped links in series pass requests as their slowest "
        "alone would (analysis/_links.py); where there are links, the servers' time and the network delay, "
        "which already hold the links' passage, are scaled by the part `off_link_part` that makes the model "
        "reproduce the measured throughput (analysis/_network.py, 8); demands from each "
        "configuration's own measurements (times weighted by request count over the repetitions). "
        "`system_throughput_seed_variant` is the seed's series model (servers "
        "as a separate delay center after the workers) for comparison. Times in ms.",
        ("Bottlenecks, as the Predictions section's model names them (the resource with the highest utilization "
         "among the processors, the thread pools and the links; this network's own busiest centre is "
         "`busiest_mva_centre` in the CSV): " if named else
         "Bottlenecks (the centre with the highest predicted utilization): ")
        + "; ".join(f"{summary.label(r, columns)}: {r['bottleneck']}" for _, r in comparison.iterrows())
        + ".",
    ]
    for note in model.notes:
        notes.append(f"MVA model: {note}")
    # Configurations as columns while they fit a page; past that, one row per configuration and metric.
    if len(model.comparison) <= MAX_WIDE_CONFIGURATIONS:
        shown, as_index = model_metric_table(model), True
    else:
        long = model.long()
        shown, as_index = long[[c for c in columns if c in long] + ["metric", "predicted", "measured"]], False
    demand_columns = [*columns, "population"] + [
        "net_thread_ms", "workers_own_ms", "servers_ms", "network_ms", "workers_demand_ms"
    ]
    demands = model.demands[[c for c in demand_columns if c in model.demands] + link_columns(model.demands)]
    items: list = [
        Table("mva_demands", "Service demands per middleware (ms)", demands),
        Table("mva_comparison", "MVA predicted against measured (seed 000 Tables 32-33)", shown, csv=comparison,
              index=as_index),
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
    inputs = [*columns, "arrival_rate", "service_rate_per_worker", "workers", "traffic_intensity", "stable"]
    inputs = list(dict.fromkeys(c for c in inputs if c in single.comparison))
    items.append(Table("mm_inputs", "M/M/1 and M/M/m inputs per middleware (λ, μ per worker: requests/s)",
                       single.comparison[inputs], csv=single.comparison))
    items.append(Table("mm_comparison", "M/M/1 and M/M/m against measured (seed 000 Table 31)",
                       _mm_long(single.comparison, columns), csv=single.comparison))
    items.append(Table("mm1", "M/M/1 model (seed 000 Tables 22-25)", single.wide("mm1"), csv=single.mm1, index=True))
    items.append(Table("mmm", "M/M/m model (seed 000 Tables 27-30)", single.wide("mmm"), csv=single.mmm, index=True))
    peak = mm_tables(_with_highest_repetition(table, summary), service_rate="peak", config_columns=columns)
    text.append(
        "The same models with seed 000's inputs (§7.1-7.2, the rule behind its Tables 22-30): λ = the total "
        "throughput of all middlewares, μ = the highest throughput of a single repetition in the configuration's "
        "group (same parameters but the clients) for M/M/1, μ / m per worker (m = worker threads) for M/M/m. "
        "The configuration that set the peak has ρ just below 1 (exactly 1 with one repetition: no steady "
        "state); the service-time rule above reproduces R_mw at light load instead."
    )
    items.append(Table("mm_comparison_peak", "M/M/1 and M/M/m with the peak-throughput service rate against "
                       "measured (seed 000 §7.1-7.2)", _mm_long(peak.comparison, columns), csv=peak.comparison))
    items.append(Table("mm1_peak", "M/M/1 model, peak-throughput service rate (seed 000 Tables 22-25)",
                       peak.wide("mm1"), csv=peak.mm1, index=True))
    items.append(Table("mmm_peak", "M/M/m model, peak-throughput service rate (seed 000 Tables 27-30)",
                       peak.wide("mmm"), csv=peak.mmm, index=True))
    return Section("Queueing models", text, items)
