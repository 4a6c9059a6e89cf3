"""The report's "Queueing models" section (`analysis.network_model`, `analysis.mm_tables`; seed 000
§7): the MVA network of queues per middleware against the measurements (Tables 32-33), with the
bottleneck the Predictions section's model names, and M/M/1 and M/M/m per middleware (Tables
22-31), from measured service times and from seed 000's peak-throughput rule."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from ..analysis import (
    NetworkModelError,
    link_columns,
    mm_tables,
    model_metric_table,
    named_bottlenecks,
    network_model,
)
from ..results import ResultsSummary
from . import _plots as plots
from ._document import Section, Table, present
from ._plots import report_figure

# Configurations shown as the MVA table's columns up to this many; past it, one row per metric.
MAX_WIDE_CONFIGURATIONS = 4
# The rows of the M/M/1 and M/M/m comparison: (metric, column prefix of its model and measured values).
_MM_COMPARED = (
    ("response time (ms)", "response_ms"),
    ("variance of response time (ms²)", "var_response_ms2"),
    ("waiting time (ms)", "waiting_time_ms"),
    ("jobs in the queue", "queue_length"),
    ("jobs in the system", "jobs_in_system"),
)


def queueing_models_section(summary: ResultsSummary, notes: list[str]) -> Section | None:
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
        items += present(report_figure("mva", "MVA against measurements", plots.model_plot(comparison, x, series)))
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


def _mm_long(comparison: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """One row per configuration and metric: M/M/1, M/M/m and measured side by side."""
    rows = []
    for row in comparison.to_dict(orient="records"):
        for label, key in _MM_COMPARED:
            rows.append({**{c: row[c] for c in columns if c in comparison}, "metric": label,
                         "M/M/1": row[f"{key}_mm1"], "M/M/m": row[f"{key}_mmm"], "measured": row[f"{key}_measured"]})
    return pd.DataFrame(rows)


def _with_highest_repetition(table: pd.DataFrame, summary: ResultsSummary) -> pd.DataFrame:
    """The table with ``mw_throughput_max``: each configuration's highest repetition (seed 000's peak)."""
    runs = summary.runs
    if "mw_throughput" not in runs or "configuration" not in runs or "configuration" not in table:
        return table
    highest = runs.groupby("configuration")["mw_throughput"].max()
    return table.assign(mw_throughput_max=table["configuration"].map(highest))
