"""Tables the report and the CLI show that combine a summary with a law or a model.

`interactive_law_table(summary)` applies the interactive response-time law to every
configuration, with the think time the law itself gives, Z = N/X − R (R on the clients;
seed 002 Table 5); `model_metric_table(model)` lays an MVA comparison out with metrics as rows
(predicted, measured) and configurations as columns.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .._values import configuration_label
from ..results import ResultsSummary
from ..theory import DEFAULT_TOLERANCE, interactive_law_frame
from ._network import NetworkModel

__all__ = ["interactive_law_table", "model_metric_table"]


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
        # Seed 002 Table 5: the think time the law solves for, Z = N/X − R, R on the clients.
        law = (base["clients"] / base["throughput"] * 1e3 - table["response_ms"]).rename("think_time_law")
        result["think_time_law"] = result.index.map(law)
        result["think_time_from"] = z_source or np.where(
            result["measured_on"] == "middleware", "client - middleware response time", "0 (closed loop)"
        )
    return result


def model_metric_table(model: NetworkModel) -> pd.DataFrame:
    """Metrics as rows (predicted, measured), configurations as columns."""
    columns = {}
    for _, row in model.comparison.iterrows():
        label = configuration_label(row, model.config_columns, empty="all")
        values = {}
        for metric, name in model.METRICS:
            values[(name, "predicted")] = row[f"{metric}_predicted"]
            values[(name, "measured")] = row[f"{metric}_measured"]
        columns[label] = values
    frame = pd.DataFrame(columns)
    frame.index = [f"{name} — {kind}" for name, kind in frame.index]
    return frame
