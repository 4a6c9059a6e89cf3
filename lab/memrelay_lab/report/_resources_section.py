"""The report's "Servers and processes" section: every backend server as a queueing centre with
its visit ratio and demand (seed 002 §3), the processor and network use of every process, and
memrelay's queue length over time (seed 004)."""

from __future__ import annotations

import pandas as pd

from ..analysis import (
    max_throughput,
    process_utilization,
    queue_length_series,
    server_demands,
    server_load,
    server_network,
)
from ..results import ResultsSummary
from . import _plots
from ._document import Figure, Section, Table

_MB = 1e6


def resources_section(summary: ResultsSummary) -> Section | None:
    results = summary.results
    columns = [c for c in summary.display_columns]
    processes = process_utilization(results.processes, columns)
    demands = server_demands(results.servers, results.processes, results.runs, columns)
    queue = queue_length_series(results.windows) if not results.windows.empty else pd.DataFrame()
    if processes is None and demands is None and queue.empty:
        return None
    text = [
        "What every program of the runs used over the kept interval, measured from outside: processor time per "
        "process (the kernel's accounting, psutil) and bytes sent and received over TCP (the kernel's per-socket "
        "counters), processor time at the kept interval's ends and bytes a quarter second inside them (seed 004: CPU "
        "and network utilization of every process). Cores busy = processor seconds per second (1 = one core fully used)."
    ]
    items: list[Table | Figure] = []
    if demands is not None:
        shares = _server_shares(results.servers)
        if shares is not None:
            demands = demands.merge(shares, on=["configuration", "server"], how="left")
        measured = summary.table.set_index("configuration")["throughput"]
        demands["measured_throughput"] = demands["configuration"].map(measured)
        text.append(
            "Backend servers as queueing centres (seed 002 §3): visit ratio V_i = requests the middlewares sent "
            "server i per client request (a replicated set visits every replica), utilization U_i = the server's "
            "cores busy, demand D_i = U_i / X (utilization law, X the clients' throughput), service time per visit "
            "S_i = D_i / V_i. The largest D_i bounds the throughput at 1 / D_max (the servers' processors alone; "
            "the bound is far above the measured throughput when the servers are not the bottleneck)."
        )
        # memcached's own byte counts and request shares stay in the CSV: the process table has the bytes.
        shown = demands[[*[c for c in columns if c in demands], "server", "visits", "utilization", "demand_us",
                         "service_us", "throughput_bound", "measured_throughput"]]
        items.append(Table("server_centres", "Backend servers as queueing centres (means over repetitions)",
                           shown.rename(columns={"visits": "V_i", "utilization": "U_i (cores)", "demand_us": "D_i (µs)",
                                                 "service_us": "S_i (µs)", "throughput_bound": "1/D_max (req/s)",
                                                 "measured_throughput": "X measured (req/s)"}),
                           csv=demands,
                           units={"V_i": "jobs", "U_i (cores)": "jobs", "D_i (µs)": "plain", "S_i (µs)": "plain"}))
        network = server_network(demands, summary.pooled_table())
        if network is not None:
            text.append(
                "The servers as a network of queues (seed 002 §3, Tables 3-4): per configuration, exact MVA at the "
                "measured population with one queue centre per server (demand D_i above) and everything else a "
                "request meets as one delay centre (the clients' response time minus the servers' demands, the "
                "seed's think time and other devices together). Model against measured: throughput, each server's "
                "utilization, and the jobs the model puts at each server. A server whose model utilization nears 1 "
                "would be the bottleneck; memrelay's per-server centres share one worker pool (experiments/README.md, "
                "\"Worker threads\"), where the seed had a read pool and a write thread per server."
            )
            labels = summary.table.set_index("configuration")
            network.insert(1, "label", [summary.label(labels.loc[c], columns) for c in network["configuration"]])
            items.append(Table("server_network", "The servers as a network of queues: MVA against measured "
                               "(seed 002 Table 4)", network.drop(columns="configuration"), csv=network,
                               units={"U_model": "jobs", "U_measured": "jobs", "Q_model": "jobs"}))
    if processes is not None:
        shown = processes.assign(**{
            "received (MB/s)": processes.get("received_bytes_per_s", float("nan")) / _MB,
            "sent (MB/s)": processes.get("sent_bytes_per_s", float("nan")) / _MB,
        }).rename(columns={"cpu_utilization": "cores busy"})
        shown = shown[[*[c for c in columns if c in shown], "process", "role", "cores busy", "received (MB/s)",
                       "sent (MB/s)"]]
        items.append(Table("process_utilization", "Processor and network use of every process (means over "
                           "repetitions)", shown, csv=processes,
                           units={"cores busy": "jobs", "received (MB/s)": "jobs", "sent (MB/s)": "jobs"}))
        figure = _utilization_plot(processes, summary)
        if figure is not None:
            items.append(figure)
    if not queue.empty:
        figure = _queue_plot(queue, summary)
        if figure is not None:
            text.append("memrelay's request queue over time (its per-second mean queue length), for the configuration "
                        "that reaches the maximum throughput with the fewest resources and for the most loaded one, "
                        "every repetition and middleware: a queue that grows through a run means the run never reached a "
                        "steady state.")
            items.append(figure)
    return Section("Servers and processes", text, items)


def _server_shares(servers: pd.DataFrame) -> pd.DataFrame | None:
    if servers.empty or "middleware_requests" not in servers or servers["middleware_requests"].isna().all():
        return None
    load = server_load(servers).merge(servers[["run_id", "server", "configuration"]], on=["run_id", "server"])
    load["received_mb_s"] = load["bytes_read_per_s"] / _MB
    load["sent_mb_s"] = load["bytes_written_per_s"] / _MB
    return load.groupby(["configuration", "server"])[["request_share", "received_mb_s", "sent_mb_s"]].mean().reset_index()


def _utilization_plot(processes: pd.DataFrame, summary: ResultsSummary) -> Figure | None:
    x = summary.x
    if x is None or x not in processes or processes[x].nunique() < 2:
        return None
    by_role = processes.groupby([*summary.series, x, "role"] if summary.series else [x, "role"], dropna=False)
    sums = by_role[[c for c in ("cpu_utilization", "received_bytes_per_s", "sent_bytes_per_s")
                    if c in processes]].sum(min_count=1).reset_index()
    has_network = "received_bytes_per_s" in sums and sums["received_bytes_per_s"].notna().any()
    plt = _plots.plt
    figure, axes = plt.subplots(1, 2 if has_network else 1, figsize=(11 if has_network else 6.5, 3.8),
                                layout="constrained", squeeze=False)
    styles = ("-", "--", ":", "-.")
    for role_index, (role, part) in enumerate(sums.groupby("role", sort=True)):
        for style_index, (series_name, group) in enumerate(_plots.series_frames(part, x, summary.series)):
            label = f"{role} {series_name}" if summary.series else role
            style = dict(color=f"C{role_index}", linestyle=styles[style_index % len(styles)], marker="o", markersize=3)
            axes[0][0].plot(group[x], group["cpu_utilization"], label=label, **style)
            if has_network:
                total = (group["received_bytes_per_s"] + group["sent_bytes_per_s"]) / _MB
                axes[0][1].plot(group[x], total, label=label, **style)
    axes[0][0].set(xlabel=_plots.axis_label(x), ylabel="cores busy", title="Processor use by program")
    if has_network:
        axes[0][1].set(xlabel=_plots.axis_label(x), ylabel="MB/s (sent + received)", title="Network use by program")
    for ax in axes[0]:
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="x-small", ncol=2)
    return Figure("process_utilization", "Processor and network use of every program, summed over its processes",
                  _plots.png_bytes(figure))


def _queue_plot(queue: pd.DataFrame, summary: ResultsSummary) -> Figure | None:
    table = summary.table
    found = max_throughput(table)
    chosen = [int(found.smallest["configuration"])] if found is not None else []
    busiest = int(table.sort_values(["clients", "throughput"], ascending=False)["configuration"].iloc[0])
    chosen = list(dict.fromkeys([*chosen, busiest]))
    runs = summary.runs.set_index("run_id")["configuration"]
    queue = queue.assign(configuration=queue["run_id"].map(runs))
    queue = queue[queue["configuration"].isin(chosen)]
    if queue.empty:
        return None
    plt = _plots.plt
    figure, axes = plt.subplots(1, len(chosen), figsize=(5.5 * len(chosen), 3.6), layout="constrained", squeeze=False)
    for ax, configuration in zip(axes[0], chosen):
        part = queue[queue["configuration"] == configuration]
        for (run_id, source), series in part.groupby(["run_id", "source"], sort=True):
            ax.plot(series["t_s"], series["queue_length"], marker="o", markersize=3, label=f"{run_id} {source}")
        row = table.set_index("configuration").loc[configuration].to_dict()
        ax.set(xlabel="time since the load started (s)", ylabel="mean queue length",
               title=summary.label(row) or "the configuration")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="x-small")
    return Figure("queue_length", "memrelay's queue length over time", _plots.png_bytes(figure))
