"""The report's "Read/write mix: M/M/1 and M/M/m over the servers" section
(`analysis.mix_models`, seed 002 §1-2 Tables 1-2)."""

from __future__ import annotations

import pandas as pd

from ..analysis import mix_models
from ..results import ResultsSummary
from ._document import Section, Table

_COMPARED = (
    ("prob. of 0 jobs", "prob_zero_jobs", False),
    ("prob. of queueing", "prob_queueing", False),
    ("jobs in the system E[n]", "jobs_in_system", True),
    ("jobs in the queue E[n_q]", "jobs_in_queue", True),
    ("response time E[r] (ms)", "response_ms", True),
    ("waiting time E[w] (ms)", "waiting_ms", True),
)
_INPUTS = {
    "arrival_rate": "λ (req/s)", "read_service_ms": "E[s] read (ms)", "set_service_ms": "E[s] set (ms)",
    "write_share": "write share", "mix_service_rate": "μ mix (req/s)", "servers": "m (servers)",
    "service_rate_per_server": "μ per server (req/s)", "traffic_intensity": "ρ",
}


def mix_models_section(summary: ResultsSummary) -> Section | None:
    frame = mix_models(summary.pooled_table(), summary.display_columns)
    if frame is None:
        return None
    columns = [c for c in summary.display_columns if c in frame]
    # a swept servers column is the model's m already: shown once
    inputs = frame[columns + [k for k in _INPUTS if k not in columns]].rename(columns=_INPUTS)
    rows = []
    for row in frame.to_dict(orient="records"):
        for label, key, measured in _COMPARED:
            rows.append({**{c: row[c] for c in columns}, "metric": label, "M/M/1": row[f"{key}_mm1"],
                         "M/M/m": row[f"{key}_mmm"], "measured": row[f"{key}_measured"] if measured else float("nan")})
    text = [
        "The middleware as one queue again, with the service rate built from the read/write mix and the backend "
        "servers as the m servers (seed 002 §1–2). Per type, E[s] is the time after the request queue (response "
        "time − queue time, memrelay's per-type means); μ mix = 1 / (p_read E[s]_read + p_set E[s]_set) is the rate "
        "one worker serves the mix at. M/M/m: m = backend servers, each with its share of the workers "
        "(μ per server = workers/servers × μ mix); M/M/1: the middleware as one server of rate workers × μ mix. "
        "Measured: memrelay's sampled requests inside it, its queue length, response and queue time, per middleware. "
        "ρ ≥ 1: no steady state (n/a)."
    ]
    return Section("Read/write mix: M/M/1 and M/M/m over the servers", text, [
        Table("mix_inputs", "Inputs per middleware (seed 002 Table 1)", inputs, csv=frame,
              units={"ρ": "probability", "write share": "probability"}),
        Table("mix_models", "M/M/1 and M/M/m of the mix against measured (seed 002 Table 2)", pd.DataFrame(rows),
              csv=frame),
    ])
