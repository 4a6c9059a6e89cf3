"""The report's "Per-server network: GET M/M/m, SET M/M/1, a response queue" section
(`analysis.pools_per_server_table`, seed 002 §3, Figure 2, Tables 3-4)."""

from __future__ import annotations

import pandas as pd

from ..analysis import pools_per_server_table
from ..results import ResultsSummary
from ._document import Section, Table

# Two tables, so that each fits a page (at most 12 columns with the configuration's).
_INPUTS = {
    "population": "N", "think_time_ms": "Z (ms)", "network_ms": "network (ms)", "servers": "servers",
    "visits_get": "V get", "visits_set": "V set",
}
_SERVICE = {
    "read_threads": "m (threads per GET queue)", "sets_in_service": "sets in service",
    "get_service_ms": "S get (ms)", "set_service_ms": "S set (ms)", "response_queue_service_ms": "S response (ms)",
}
_CENTRES = (("GET (per queue)", "get"), ("SET (per queue)", "set"), ("response queue", "response_queue"))
_THROUGHPUT = {
    "throughput_measured": "X measured (req/s)", "throughput_predicted": "X model (req/s)", "throughput_error": "error",
    "throughput_seed_normalised": "X model, seed's S get / m (req/s)", "response_ms_measured": "R mw measured (ms)",
    "response_ms_predicted": "R model (ms)", "bottleneck": "bottleneck",
}


def pools_per_server_section(summary: ResultsSummary) -> Section | None:
    frame = pools_per_server_table(summary.pooled_table(), summary.display_columns)
    if frame is None:
        return None
    columns = [c for c in summary.display_columns if c in frame and c not in _INPUTS and c not in _SERVICE]
    inputs = frame[columns + list(_INPUTS)].rename(columns=_INPUTS)
    service = frame[columns + list(_SERVICE)].rename(columns=_SERVICE)
    throughput = frame[columns + list(_THROUGHPUT)].rename(columns=_THROUGHPUT)
    rows = []
    for row in frame.to_dict(orient="records"):
        for label, key in _CENTRES:
            measured = row.get(f"{key}_mw_response_ms_measured", float("nan"))
            rows.append({**{c: row[c] for c in columns}, "device": label, "E[n] model (all queues)": row[f"{key}_jobs"],
                         "E[r] model (ms)": row[f"{key}_response_ms"], "E[r] mw measured (ms)": measured,
                         "X_i (req/s)": row[f"{key}_throughput"], "utilization": row[f"{key}_utilization"]})
    text = [
        "Seed 002 §3's network of queues (its Figure 2), per middleware, solved with exact MVA at the measured "
        "population: per backend server a GET queue served by m read threads (an M/M/m centre, m = workers / "
        "servers) and a SET queue (an M/M/1 centre), and one response queue every request visits (M/M/1). "
        "Visits (Table 3): V get = read share / servers and V set = write share / servers per queue, 1 at the "
        "response queue. Service per visit: the middleware's response minus queue time per type less the "
        "response queue's service time, which is the net thread's demand of the Queueing models section (the "
        "time memrelay spends sending a reply back). S set is divided by the sets in service, as the seed did for "
        "its asynchronous set thread; memrelay has no set thread (its pool serves both types), so that is m, the "
        "threads that can serve a server's sets at once. "
        "Z = N/X − R on the clients (Table 3's think time, from Table 5) and the network delay (client minus "
        "middleware response time) are outside the middleware's centres. The seed also divided S get by the "
        "threads, which counts the pool's parallelism twice (m servers each at 1/m of the time): the throughput "
        "that gives is shown beside. memrelay has one shared queue and pool, not a queue per server: this is "
        "the seed's architecture, for comparison, and the bottleneck named here is this network's busiest "
        "device (the Predictions section names the report's). E[r] measured: the middleware's mean per type, "
        "request-queue wait included.",
    ]
    units = {"error": "relative", "V get": "probability", "V set": "probability", "N": "plain",
             "E[n] model (all queues)": "jobs", "m (threads per GET queue)": "plain", "servers": "plain",
             "sets in service": "plain"}
    return Section("Per-server network: GET M/M/m, SET M/M/1, a response queue", text, [
        Table("pools_per_server_inputs", "Population, think time and visits per middleware (seed 002 Table 3)",
              inputs, csv=frame, units=units),
        Table("pools_per_server_service", "Service per visit (seed 002 Tables 1 and 3; times in ms)", service,
              csv=frame, units=units),
        Table("pools_per_server_throughput", "Throughput per middleware, measured and predicted (requests/s)",
              throughput, csv=frame, units=units),
        Table("pools_per_server_devices", "Devices: model against measured (seed 002 Table 4)", pd.DataFrame(rows),
              csv=frame, units=units),
    ])
