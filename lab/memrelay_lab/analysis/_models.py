"""Both queueing models of one results summary: what `model build` and the report show."""

from __future__ import annotations

from ..results import ResultsSummary
from ._mm_tables import MMTables, mm_tables
from ._network import NetworkModel, network_model

__all__ = ["models_from_summary"]


def models_from_summary(
    summary: ResultsSummary,
    *,
    variant: str = "nested",
    demands: str = "each",
    service_rate: str = "service-time",
) -> tuple[NetworkModel, MMTables]:
    """Both models for the summary's configurations with a middleware."""
    columns = summary.display_columns
    for needed in ("clients", "middlewares", "workers"):
        if needed not in columns:
            columns = [*columns, needed]
    table = summary.pooled_table()
    return (
        network_model(table, variant=variant, demands=demands, config_columns=columns),
        mm_tables(table, service_rate=service_rate, config_columns=columns),
    )
